"""`apt` / `package` against ansible-core's own apt module, on this machine's real dpkg and apt.

Check mode: ansible-core's apt module (run by the system python3, which has python3-apt, the
binding it needs) and fleetops' payload decide the same `changed` / failure for the same names
and states, and neither changes anything. Then a real round trip through the executor, as root
on this machine: a small package that is not installed is installed (changed), installed again
(ok), removed (changed), removed again (ok); dpkg's own database is the judge.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig

import pytest

from fleetops.remote.host import package
from tests.support import oracle
from tests.support.playbook_run import run_yaml

SYSTEM_PYTHON = "/usr/bin/python3"
# a package apt knows that nothing on a test machine needs: installed and removed by the test
PROBE = "sl"


def _has_python_apt() -> bool:
    return os.path.exists(SYSTEM_PYTHON) and subprocess.run(
        [SYSTEM_PYTHON, "-c", "import apt, apt_pkg"], capture_output=True).returncode == 0


pytestmark = [
    pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh installs the [test] extra"),
    pytest.mark.skipif(shutil.which("apt-get") is None, reason="not a Debian-family host: apt is not here"),
]


def installed(name: str) -> bool:
    return package._apt_installed(name) is not None


def ansible_apt(args: dict, tmp_path, check: bool) -> dict:
    spec = tmp_path / "apt-args.json"
    spec.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check}}))
    env = dict(os.environ, PYTHONPATH=sysconfig.get_paths()["purelib"])
    p = subprocess.run([SYSTEM_PYTHON, "-m", "ansible.modules.apt", str(spec)], capture_output=True, text=True,
                       env=env, timeout=300, cwd=str(tmp_path))
    text = p.stdout
    return json.loads(text[text.index("{"):text.rindex("}") + 1])


CASES = [
    {"name": "python3", "state": "present"},
    {"name": PROBE, "state": "present"},
    {"name": [PROBE, "python3"], "state": "present"},
    {"name": "no-such-package-fleetops", "state": "present"},
    {"name": "python3", "state": "absent"},
    {"name": PROBE, "state": "absent"},
    {"name": "no-such-package-fleetops", "state": "absent"},
    {"name": "dpkg", "state": "latest"},
    {"update_cache": True, "cache_valid_time": 10 ** 9},
]


@pytest.mark.skipif(not _has_python_apt(), reason="ansible-core's apt module needs python3-apt in /usr/bin/python3")
@pytest.mark.parametrize("args", CASES, ids=[json.dumps(c) for c in CASES])
def test_apt_check_mode_as_ansible_core(args, tmp_path):
    assert not installed(PROBE), f"{PROBE} is installed on this machine; the test needs it absent"
    want = ansible_apt(args, tmp_path, check=True)
    got = package.main({**args, "manager": "apt", "_check": True})
    assert (bool(got.get("changed")), bool(got.get("failed"))) == (bool(want.get("changed")), bool(want.get("failed")))
    if want.get("failed"):
        assert got["msg"] == want["msg"]
    assert got.get("cache_updated", False) == want.get("cache_updated", False)
    assert not installed(PROBE)


@pytest.mark.skipif(os.geteuid() != 0, reason="installing a package needs root")
def test_apt_installs_and_removes_for_real(tmp_path):
    assert not installed(PROBE), f"{PROBE} is installed on this machine; the test needs it absent"
    play = """
        - hosts: h1
          gather_facts: false
          tasks:
            - name: add
              apt: {name: "%s", state: present, install_recommends: false}
            - name: add again
              package: {name: "%s"}
            - name: drop
              apt: {name: "%s", state: absent, purge: true}
            - name: drop again
              apt: {name: "%s", state: absent}
    """ % ((PROBE,) * 4)
    try:
        outcome, rec = run_yaml(tmp_path, play)
        assert outcome.exit_code == 0, rec.failures()
        got = {t: rec.results(t)["h1"]["changed"] for t in ("add", "add again", "drop", "drop again")}
        assert got == {"add": True, "add again": False, "drop": True, "drop again": False}
        assert "sl" in rec.results("add")["h1"]["packages"]
    finally:
        if installed(PROBE):
            subprocess.run(["apt-get", "remove", "-y", "-q", "--purge", PROBE], capture_output=True)
    assert not installed(PROBE)


def test_a_change_without_root_fails_before_running(monkeypatch):
    monkeypatch.setattr(package.os, "geteuid", lambda: 1000)
    res = package.main({"name": PROBE, "manager": "apt", "_check": False})
    assert res["failed"] and "needs root: set become: true" in res["msg"]
    assert not installed(PROBE)
