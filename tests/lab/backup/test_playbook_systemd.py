"""playbooks/backup-units.yml end to end on a host whose PID 1 is a real systemd and whose login
user has a real user manager (tests/support/systemd_host.py): the systemd path as the field
runs it. Through the real CLI: the timer installed, enabled and started by the user's manager,
the service the timer would start run by that manager and leaving a verified backup, a second
run changing nothing, and `backup_state=absent` taking the units away and leaving the backups."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpus import build
from tests.support import systemd_host
from tests.support.backup import ROOT, SCRIPT, backups_in, integrity, manifest_of

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(systemd_host.available() is not None, reason=str(systemd_host.available()))]

PLAYBOOK = ROOT / "playbooks" / "backup-units.yml"
HOME = f"/home/{systemd_host.USER}"
UNITS = ".config/systemd/user"


@pytest.fixture(scope="module")
def sysd(tmp_path_factory):
    host = systemd_host.SystemdHost(str(tmp_path_factory.mktemp("systemd-backup-host")))
    host.build({})
    src = tmp_path_factory.mktemp("src") / "state.db"
    build.realistic_db(src, sessions=3, messages_per_session=(3, 6), seed=11)
    host.write_user_file(".hermes/state.db", "")
    with open(host.path(f"{HOME}/.hermes/state.db"), "wb") as fh:
        fh.write(src.read_bytes())
    for p in (host.path(f"{HOME}/.hermes"), host.path(f"{HOME}/.hermes/state.db")):
        os.chmod(p, 0o700 if os.path.isdir(p) else 0o600)
    host.start()
    try:
        yield host
    finally:
        host.stop()


def _run(host, tmp_path, *extra) -> dict:
    inv = host.inventory(str(tmp_path / "inv.yml"))
    r = subprocess.run([sys.executable, "-m", "fleetops", "run", str(PLAYBOOK), "-i", inv, "--json", "--results",
                        str(tmp_path / "runs"), "-e", "backup_randomized_delay=1s", *extra],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"no JSON document (rc {r.returncode}): {r.stdout[-2000:]} {r.stderr[-2000:]}") from None
    failed = [(t["name"], e["result"].get("msg")) for p in doc["plays"] for t in p["tasks"]
              for e in t["results"].values() if e["status"] == "failed"]
    assert r.returncode == 0 and not failed, failed or r.stderr[-2000:]
    return doc


def _changed(doc) -> list:
    return [t["name"] for p in doc["plays"] for t in p["tasks"] for e in t["results"].values()
            if e["status"] == "changed"]


def _as_user(host, command: str) -> str:
    """A command run as the login user over SSH, in that user's session (its manager answers)."""
    r = subprocess.run(["ssh", "-i", host.key_path, "-o", f"UserKnownHostsFile={host.known_hosts_path}",
                        "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-p", str(host.port),
                        f"{systemd_host.USER}@127.0.0.1", command], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (command, r.stdout, r.stderr)
    return r.stdout.strip()


def test_the_systemd_path_installs_runs_and_goes(sysd, tmp_path):
    first = _run(sysd, tmp_path)
    changed = _changed(first)
    assert "systemd user timer" in changed and "enable and start the timer" in changed, changed
    assert "crontab entry (no systemd user manager)" not in changed
    script = Path(sysd.path(f"{HOME}/.local/lib/fleetops/hermes_backup.py"))
    assert script.read_bytes() == SCRIPT.read_bytes()
    assert os.path.lexists(sysd.path(f"{HOME}/{UNITS}/timers.target.wants/hermes-backup.timer"))
    assert _as_user(sysd, "systemctl --user is-enabled hermes-backup.timer") == "enabled"
    assert _as_user(sysd, "systemctl --user is-active hermes-backup.timer") == "active"
    dest = Path(sysd.path(f"{HOME}/.hermes/fleetops/backups"))
    [made] = backups_in(dest)                                   # run_now: the job, run once by the play
    assert manifest_of(made)["integrity"] == "ok"

    # what the timer starts, started by the user's own manager: a second verified backup
    _as_user(sysd, "systemctl --user start hermes-backup.service")
    show = _as_user(sysd, "systemctl --user show -p Result -p ExecMainStatus hermes-backup.service")
    assert sorted(show.splitlines()) == ["ExecMainStatus=0", "Result=success"], show
    left = backups_in(dest)
    assert len(left) == 2 and all(manifest_of(p)["integrity"] == "ok" and integrity(p) == ["ok"] for p in left)

    second = _run(sysd, tmp_path, "-e", "run_now=false")
    assert _changed(second) == []

    gone = _run(sysd, tmp_path, "-e", "backup_state=absent")
    assert "enable and start the timer" not in _changed(gone)
    assert not os.path.lexists(sysd.path(f"{HOME}/{UNITS}/hermes-backup.timer"))
    assert not os.path.lexists(sysd.path(f"{HOME}/{UNITS}/timers.target.wants/hermes-backup.timer"))
    assert _as_user(sysd, "systemctl --user is-active hermes-backup.timer || true") in ("inactive", "unknown")
    assert len(backups_in(dest)) == 2                           # backups stay
