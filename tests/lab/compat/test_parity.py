"""A real-shaped playbook run on the lab hosts by ansible-core 2.19 and by fleetops: same results.

Both run the same files (tests/data/ansible/lab/site.yml with ansible-core's own include_import
roles) against the same sshd hosts, known_hosts and key; per task and host the outcome (ok,
changed, failed, skipped), the debug and fail messages (as text: ansible-core 2.19 keeps a
`"{{ expr }}"` message's native type, fleetops shows it as text), and the files left in the
homes must agree. ansible-core's `json` callback lives in a collection, so its default output
with `-v` and one-line JSON results is read instead.
"""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from fleetops.engine.inventory import load_inventory
from fleetops.engine.playbook import load_playbook
from fleetops.engine.executor import RunOptions, run_playbook
from fleetops.engine.connection.ssh import SSHTransport
from fleetops.engine.validate import validate
from fleetops.extensions import get_modules
from tests.support import oracle
from tests.support.playbook_run import Recorder
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


def _outcome(r: dict) -> str:
    if r.get("unreachable"):
        return "unreachable"
    if r.get("failed"):
        return "failed"
    if r.get("skipped"):
        return "skipped"
    return "changed" if r.get("changed") else "ok"


_LINE = re.compile(r"^(ok|changed|skipping|fatal): \[([^\]]+)\](?:: FAILED!)?(?: => (\(item=.*?\) => )?(\{.*\}))?$")


def _ansible(project: str, lab) -> dict:
    """(task, host) -> [(outcome, debug msg)] from ansible-playbook -v's default output (one JSON
    result per line); a loop's items are folded into one result, as fleetops reports a loop."""
    ssh_args = (f"-o UserKnownHostsFile={lab.known_hosts_path} -o StrictHostKeyChecking=yes "
                "-o ControlMaster=no -o ControlPath=none")
    p = oracle.run("ansible-playbook", "-v", "-i", lab.inventory_path, os.path.join(project, "site.yml"), cwd=project,
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False",
                        "ANSIBLE_SSH_ARGS": ssh_args, "ANSIBLE_HOST_KEY_CHECKING": "True"})
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    out: dict = {}
    items: dict = {}
    task = None
    for line in p.stdout.splitlines():
        head = re.match(r"^(?:TASK|RUNNING HANDLER) \[(.*)\] \**$", line)
        if head:
            task = head.group(1)
            continue
        m = _LINE.match(line)
        if not m or task is None:
            continue
        status, host, item, body = m.groups()
        result = json.loads(body) if body else {}
        outcome = {"ok": "ok", "changed": "changed", "skipping": "skipped", "fatal": "failed"}[status]
        if item:
            items.setdefault((task, host), []).append(outcome)
            continue
        if result.get("results") and (task, host) in items:
            outcomes = items.pop((task, host))
            outcome = ("failed" if "failed" in outcomes else "changed" if "changed" in outcomes
                       else "skipped" if set(outcomes) == {"skipped"} else "ok")
        msg = result.get("msg") if "msg" in result and set(result) <= {"msg", "changed", "_ansible_verbose_always",
                                                                       "_ansible_no_log", "failed"} else None
        out.setdefault((task, host), []).append((outcome, None if msg is None or outcome == "skipped" else str(msg)))
    for key, outcomes in items.items():     # a loop whose summary line was not printed
        outcome = "failed" if "failed" in outcomes else "changed" if "changed" in outcomes else "ok"
        out.setdefault(key, []).append((outcome, None))
    return out


def _fleetops(project: str, lab) -> dict:
    inv = load_inventory(lab.inventory_path)
    book = load_playbook(os.path.join(project, "site.yml"), get_modules())
    validate(book, inv, {}, get_modules())
    rec = Recorder()
    run_playbook(book, inv, RunOptions(results_dir=os.path.join(project, "runs")), rec, "parity", get_modules(),
                 transport_factory=SSHTransport)
    out = {}
    for host, _pi, _ti, name, module, res, *_ in rec.of("host_result"):
        if module == "meta":
            continue          # ansible-core prints no result line for a meta task
        msg = res.get("msg") if module in ("debug", "fail") and not res.get("results") else None
        msg = None if msg is None or _outcome(res) == "skipped" else str(msg)
        out.setdefault((name, host), []).append((_outcome(res), msg))
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
