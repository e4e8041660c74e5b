"""`fleetops audit` exit codes as the README's table gives them: 3 when hosts were only
unreachable, 5 when an audited database is not healthy (and 5 wins when both happen)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from fleetops.hermes.cli import EXIT_NOT_HEALTHY, exit_code


def _row(verdict):
    return {"host": "h", "profile": "*" if verdict in ("unreachable", "audit_failed") else "default",
            "verdict": verdict}


@pytest.mark.parametrize("verdicts,engine,want", [
    (["healthy"], 0, 0),
    (["unreachable"], 3, 3),
    (["healthy", "unreachable"], 3, 3),
    (["corrupt", "unreachable"], 3, EXIT_NOT_HEALTHY),   # both: 5 wins
    (["audit_failed", "healthy"], 2, 2),
    (["needs_attention"], 0, EXIT_NOT_HEALTHY),
    (["corrupt"], 4, 4),
    (["corrupt"], 130, 130),
])
def test_exit_code_table(verdicts, engine, want):
    assert exit_code([_row(v) for v in verdicts], engine) == want


def test_audit_of_an_unreachable_host_only_exits_3(tmp_path):
    inv = tmp_path / "inv.ini"
    inv.write_text("[fleet]\nh1 ansible_host=127.0.0.1 ansible_port=1\n")   # connection refused at once
    p = subprocess.run([sys.executable, "-m", "fleetops", "audit", "-i", str(inv), "--json",
                        "--results", str(tmp_path / "runs")], capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path))
    assert p.returncode == 3, p.stdout[-2000:] + p.stderr[-2000:]
    assert '"verdict": "unreachable"' in p.stdout


def test_audit_takes_forks_like_run(tmp_path, monkeypatch):
    """Every command that runs a play takes --forks, and audit's reaches the executor."""
    from fleetops import cli, runner

    seen = {}

    def execute(loaded, options, **kw):
        seen["forks"] = options.forks
        raise SystemExit(0)
    monkeypatch.setattr(runner, "execute", execute)
    monkeypatch.setattr(runner, "load", lambda *a, **k: None)
    inv = tmp_path / "inv.ini"
    inv.write_text("h1 ansible_host=127.0.0.1 ansible_port=1\n")
    with pytest.raises(SystemExit):
        cli.main(["audit", "-i", str(inv), "--forks", "7"])
    assert seen == {"forks": 7}
    for command in ("run", "audit"):
        assert "--forks" in cli.build_parser()._subparsers._group_actions[0].choices[command].format_help()
