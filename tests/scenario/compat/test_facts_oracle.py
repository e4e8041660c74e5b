"""The facts payload against ansible-core's own `setup` module, both run on this machine.

Playbooks branch on these (`ansible_default_ipv4.address`, `ansible_distribution_major_version`,
`ansible_pkg_mgr == 'apt'`, `ansible_env.HOME`); each fleetops fact that has an ansible-core
namesake must hold what ansible-core's setup module says on the same machine.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fleetops.remote.host import facts
from tests.support import oracle

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")
SUBSETS = ["!all", "!min", "network", "distribution", "pkg_mgr", "env", "platform", "user"]
# fleetops' own, or set by fleetops where ansible-core sets them elsewhere (the controller)
OWN = {"ansible_sqlite_version", "fleetops_sqlite_fts5", "fleetops_sqlite_trigram", "ansible_python",
       "ansible_nproc", "ansible_python_version"}


def ansible_setup(tmp_path, env) -> dict:
    spec = tmp_path / "setup.json"
    spec.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"gather_subset": SUBSETS}}))
    p = subprocess.run([sys.executable, "-m", "ansible.modules.setup", str(spec)], capture_output=True,
                       text=True, timeout=120, env=env, cwd=str(tmp_path))
    return json.loads(p.stdout)["ansible_facts"]


def test_facts_as_ansible_core_setup(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTEST_"))}
    want = ansible_setup(tmp_path, env)
    script = "import json; from fleetops.remote.host import facts; print(json.dumps(facts.gather()))"
    got = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                    env=env, cwd=str(tmp_path), timeout=60, check=True).stdout)
    shared = sorted(set(got) - OWN)
    assert {"ansible_default_ipv4", "ansible_env", "ansible_distribution_major_version",
            "ansible_pkg_mgr"} <= set(shared)
    missing = [k for k in shared if k not in want]
    assert not missing, f"fleetops facts ansible-core does not have: {missing}"
    volatile = {"_", "PWD", "OLDPWD", "SHLVL"}          # the process that reads the environment
    for k in shared:
        g, w = got[k], want[k]
        if k == "ansible_env":
            g = {n: v for n, v in g.items() if n not in volatile}
            w = {n: v for n, v in w.items() if n not in volatile}
        assert g == w, k


def test_no_default_route_is_empty_as_in_ansible(tmp_path, monkeypatch):
    monkeypatch.setattr(facts, "_route_default", lambda: (None, None))
    assert facts.default_ipv4() == {}


def test_pkg_mgr_prefers_the_family_manager(monkeypatch):
    present = {"/usr/bin/yum", "/usr/bin/dnf", "/usr/bin/apt-get"}
    monkeypatch.setattr(facts.os.path, "exists", lambda p: p in present)
    assert facts.pkg_mgr("RedHat") == "dnf"
    assert facts.pkg_mgr("Debian") == "apt"
    present.clear()
    assert facts.pkg_mgr("Debian") == "unknown"
