"""A real-shaped playbook run on the lab hosts by ansible-core 2.19 and by fleetops: same results.

Both run the same files (tests/data/ansible/lab/site.yml with ansible-core's own include_import
roles) against the same sshd hosts, known_hosts and key; per task and host the outcome (ok,
changed, failed, skipped), the debug messages, and the files left in the homes must agree.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest

from fleetops.engine.inventory import load_inventory
from fleetops.engine.playbook import load_playbook
from fleetops.engine.executor import RunOptions, run_playbook
from fleetops.engine.ssh import SSHTransport
from fleetops.engine.validate import validate
from fleetops.modules.registry import get_modules
from tests.compat import oracle
from tests.executor.conftest import Recorder

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh")]
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "ansible")
ROLES = os.path.join(DATA, "playbooks", "ansible-core", "include_import", "roles")


def _project(tmp_path) -> str:
    d = tmp_path / "project"
    shutil.copytree(os.path.join(DATA, "lab"), d)
    for role in ("role1", "role2", "role3"):
        shutil.copytree(os.path.join(ROLES, role), d / "roles" / role)
    return str(d)


def _outcome(r: dict) -> str:
    if r.get("unreachable"):
        return "unreachable"
    if r.get("failed"):
        return "failed"
    if r.get("skipped"):
        return "skipped"
    return "changed" if r.get("changed") else "ok"


def _ansible(project: str, lab) -> dict:
    ssh_args = (f"-o UserKnownHostsFile={lab.known_hosts_path} -o StrictHostKeyChecking=yes "
                "-o ControlMaster=no -o ControlPath=none")
    p = oracle.run("ansible-playbook", "-i", lab.inventory_path, os.path.join(project, "site.yml"), cwd=project,
                   env={"ANSIBLE_STDOUT_CALLBACK": "json", "ANSIBLE_SSH_ARGS": ssh_args,
                        "ANSIBLE_HOST_KEY_CHECKING": "True", "ANSIBLE_PIPELINING": "True"})
    doc = json.loads(p.stdout[p.stdout.index("{"):])
    out = {}
    for play in doc["plays"]:
        for task in play["tasks"]:
            for host, r in task["hosts"].items():
                if r.get("action") in ("include_tasks", "ansible.builtin.include_tasks"):
                    continue         # the include itself: fleetops has no result line for it
                key = (task["task"]["name"], host)
                out.setdefault(key, []).append((_outcome(r), r.get("msg") if r.get("action") in ("debug", "ansible.builtin.debug") else None))
    return out


def _fleetops(project: str, lab) -> dict:
    inv = load_inventory(lab.inventory_path)
    book = load_playbook(os.path.join(project, "site.yml"), get_modules())
    validate(book, inv, {}, get_modules())
    rec = Recorder()
    run_playbook(book, inv, RunOptions(results_dir=os.path.join(project, "runs")), rec, "parity",
                 transport_factory=SSHTransport)
    out = {}
    for host, _pi, _ti, name, module, res, *_ in rec.of("host_result"):
        out.setdefault((name, host), []).append((_outcome(res), res.get("msg") if module == "debug" else None))
    return out


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
