"""The systemd unit files as the playbook renders them: `systemd-analyze verify`, then their ExecStart run."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fleetops.engine.templating import Templar
from fleetops.remote.hermes import backup as hb
from tests.support.backup import ROOT, SCRIPT, backups_in, integrity, manifest_of

PLAYBOOK = ROOT / "playbooks" / "backup-units.yml"
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else shutil.which("python3")


def playbook_vars(home: Path, **overrides) -> dict:
    """Play vars and the two set_fact steps of the real playbook, rendered for one host."""
    play = yaml.safe_load(PLAYBOOK.read_text())[0]
    t = Templar()
    v = {**play["vars"], **overrides, "ansible_user_dir": str(home), "ansible_python": PYTHON}
    for task in play["tasks"]:
        if "set_fact" in task:
            v.update({k: t.render(x, v) for k, x in task["set_fact"].items()})
    v["backup_use_systemd"] = True
    return v


def render(name: str, variables: dict) -> str:
    text = (PLAYBOOK.parent / "templates" / name).read_text()
    out = Templar().render(text, variables)
    return out if out.endswith("\n") else out + "\n"


@pytest.fixture
def units(profile, tmp_path, systemd_analyze):
    """Rendered hermes-backup.service/.timer in a user unit dir, the job installed where they point."""
    home = profile.parent
    v = playbook_vars(home, hermes_profiles=["~/.hermes"], backup_keep=2)
    os.makedirs(v["backup_lib_dir"], mode=0o700)
    shutil.copy(SCRIPT, v["backup_script"])
    unit_dir = Path(v["backup_unit_dir"])
    unit_dir.mkdir(parents=True)
    for name in ("hermes-backup.service", "hermes-backup.timer"):
        (unit_dir / name).write_text(render(name + ".j2", v))
    return unit_dir, v


def verify(systemd_analyze, tmp_path, *files):
    runtime = tmp_path / "xdg-runtime"        # a user manager is simulated offline: it needs a runtime dir
    runtime.mkdir(mode=0o700, exist_ok=True)
    return subprocess.run([systemd_analyze, "--user", "verify", *map(str, files)], capture_output=True,
                          text=True, env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})


def test_units_verify_and_exec_start_makes_a_verified_backup(units, profile, systemd_analyze, tmp_path):
    unit_dir, v = units
    service, timer = unit_dir / "hermes-backup.service", unit_dir / "hermes-backup.timer"
    r = verify(systemd_analyze, tmp_path, service, timer)
    assert r.returncode == 0, r.stdout + r.stderr
    t = timer.read_text()
    assert "OnCalendar=*-*-* 03:17:00\n" in t and "RandomizedDelaySec=30m\n" in t and "Persistent=true\n" in t
    assert "Unit=hermes-backup.service\n" in t and "WantedBy=timers.target\n" in t
    [exec_line] = [ln for ln in service.read_text().splitlines() if ln.startswith("ExecStart=")]
    argv = [a.replace("%%", "%").replace("$$", "$") for a in shlex.split(exec_line[len("ExecStart="):])]
    assert argv == [PYTHON, v["backup_script"], "--profile-dir=%s" % profile, "--keep", "2"]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    [db] = backups_in(profile / "fleetops" / "backups")
    assert manifest_of(db)["integrity"] == "ok" and integrity(db) == ["ok"]
    assert hb.main({"action": "status", "profile_dirs": [str(profile)]})["verified"] == 1


def test_verify_catches_a_broken_unit(units, systemd_analyze, tmp_path):
    """The check above can fail: a bad calendar or a missing interpreter is reported."""
    unit_dir, v = units
    bad = playbook_vars(Path(v["ansible_user_dir"]), backup_on_calendar="someday")
    (unit_dir / "hermes-backup.timer").write_text(render("hermes-backup.timer.j2", bad))
    r = verify(systemd_analyze, tmp_path, unit_dir / "hermes-backup.timer")
    assert r.returncode != 0 and "someday" in r.stdout + r.stderr


def test_special_characters_in_paths_are_escaped(tmp_path, systemd_analyze):
    """`%` and `$` in a home path must reach the job literally (systemd would expand them)."""
    home = tmp_path / "pct%h$HOME"
    v = playbook_vars(home, hermes_profiles=["~/.hermes"])
    os.makedirs(v["backup_lib_dir"])
    shutil.copy(SCRIPT, v["backup_script"])
    unit = tmp_path / "units" / "hermes-backup.service"
    unit.parent.mkdir()
    unit.write_text(render("hermes-backup.service.j2", v))
    r = verify(systemd_analyze, tmp_path, unit)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pct%%h$$HOME" in unit.read_text()
