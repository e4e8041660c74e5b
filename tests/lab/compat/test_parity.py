"""A real-shaped playbook run on the lab hosts by ansible-core 2.19 and by fleetops: same results.

Both run the same files (tests/data/ansible/lab/site.yml with ansible-core's own include_import
roles) against the same sshd hosts, known_hosts and key; per task and host the outcome (ok,
changed, failed, skipped), the debug and fail messages (as text: ansible-core 2.19 keeps a
`"{{ expr }}"` message's native type, fleetops shows it as text), and the files left in the
homes must agree. ansible-core's `json` callback lives in a collection, so its default output
with `-v` and one-line JSON results is read instead.
"""
from __future__ import annotations

import os
import shutil

import pytest

from tests.support import lab_parity, oracle
from tests.support.paths import DATA

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh")]
DATA = os.path.join(DATA, "ansible")
ROLES = os.path.join(DATA, "playbooks", "ansible-core", "include_import", "roles")


def _project(tmp_path) -> str:
    d = tmp_path / "project"
    shutil.copytree(os.path.join(DATA, "lab"), d)
    for role in ("role1", "role2", "role3"):
        shutil.copytree(os.path.join(ROLES, role), d / "roles" / role)
    return str(d)


def _ansible(project: str, lab) -> dict:
    return lab_parity.ansible_results(os.path.join(project, "site.yml"), lab.inventory_path, lab.known_hosts_path)


def _fleetops(project: str, lab) -> dict:
    return lab_parity.fleetops_results(os.path.join(project, "site.yml"), lab.inventory_path)


def test_same_results_as_ansible_core(lab_clean, tmp_path):
    homes = {h["name"]: h["home"] for h in lab_clean.hosts}
    for home in homes.values():
        if os.path.exists(os.path.join(home, "parity-marker")):
            os.unlink(os.path.join(home, "parity-marker"))
    want = _ansible(_project(tmp_path / "a"), lab_clean)
    assert all(os.path.exists(os.path.join(h, "parity-marker")) for h in homes.values())
    for home in homes.values():
        os.unlink(os.path.join(home, "parity-marker"))
    got = _fleetops(_project(tmp_path / "f"), lab_clean)
    assert all(os.path.exists(os.path.join(h, "parity-marker")) for h in homes.values())
    assert got == want
