"""Task forms against ansible-playbook on a local host: what ansible-core refuses fleetops
refuses, at the same line, before any host is contacted (a role's tasks_from/vars_from/
handlers_from leaving the role, a module argument named `_ansible_*`, `meta: flush_handlers` as
a handler, a role include without `name=`), and the free-form `include_role: name=r k=v` /
`include_tasks: file=f` is read as ansible-core reads it."""
from __future__ import annotations

import re

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops
from tests.support.playbook_run import messages, run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = oracle.LOCAL_H1
FILES = {
    "roles/r/tasks/main.yml": "- {name: r main, debug: {msg: \"r main {{ r_var | default('unset') }}\"}}\n",
    "roles/r/tasks/other.yml": "- {name: r other, debug: {msg: r other}}\n",
    "roles/r/vars/extra.yml": "r_var: from extra\n",
    "roles/r/handlers/main.yml": "- {name: r handler, debug: {msg: r handler}}\n",
    "roles/r/defaults/main.yml": "r_default: 1\n",
    "roles/q/tasks/main.yml": "- {name: q main, debug: {msg: q main}}\n",
    "roles/q/vars/main.yml": "q_var: 1\n",
    "roles/q/handlers/main.yml": "- {name: q handler, debug: {msg: q handler}}\n",
    "outside.yml": "- {name: outside, debug: {msg: outside}}\n",
}
HEAD = "- hosts: h1\n  gather_facts: false\n  tasks:\n    - command: touch {marker}\n"
# task lines from line 5 on; the fragment of ansible-core's error; the fragment of fleetops'
REFUSED = {
    "tasks_from up and into another role": (
        "    - include_role: {name: r, tasks_from: ../../q/tasks/main.yml}\n",
        "not inside the expected role path", "tasks_from '../../q/tasks/main.yml' is not inside the role's tasks/"),
    "tasks_from an absolute path": (
        "    - import_role: {name: r, tasks_from: @DIR@/outside.yml}\n",
        "not inside the expected role path", "is not inside the role's tasks/"),
    "vars_from another role": (
        "    - include_role: {name: r, vars_from: ../../q/vars/main.yml}\n",
        "not inside the expected role path", "vars_from '../../q/vars/main.yml' is not inside the role's vars/"),
    "defaults_from another role": (
        "    - import_role: {name: r, defaults_from: ../../q/vars/main.yml}\n",
        "not inside the expected role path", "defaults_from '../../q/vars/main.yml' is not inside the role's defaults/"),
    "handlers_from another role": (
        "    - import_role: {name: r, handlers_from: ../../q/handlers/main.yml}\n",
        "not inside the expected role path", "is not inside the role's handlers/"),
    "set_fact of an _ansible_ key": (
        "    - set_fact: {fine: 1, _ansible_no_log: true}\n",
        "The prefix '_ansible_' is reserved", "argument '_ansible_no_log' of module 'set_fact': the prefix '_ansible_'"),
    "set_fact k=v of an _ansible_ key": (
        "    - set_fact: _ansible_x=1\n",
        "The prefix '_ansible_' is reserved", "argument '_ansible_x' of module 'set_fact'"),
    "an _ansible_ argument of another module": (
        "    - debug: {msg: hi, _ansible_verbosity: 3}\n",
        "The prefix '_ansible_' is reserved", "argument '_ansible_verbosity' of module 'debug'"),
    "flush_handlers as a handler": (
        "      notify: flush\n  handlers:\n    - name: flush\n      meta: flush_handlers\n",
        "flush_handlers cannot be used as a handler", "flush_handlers cannot be used as a handler"),
    "include_role without name=": (
        "    - include_role: r\n", "'name' is a required field for include_role", "'name' is a required field"),
    "include_role with a word besides name=": (
        "    - include_role: name=r other\n", "Invalid options for include_role", "unknown argument 'other'"),
    "include_role k=v with an unknown argument": (
        "    - include_role: name=r bogus=1\n", "Invalid options for include_role: bogus", "unknown argument 'bogus'"),
}
ACCEPTED = """
- hosts: h1
  gather_facts: false
  tasks:
    - include_role: name=r
    - import_role: name=r tasks_from=other
    - include_role: name=r vars_from=extra public=yes
    - include_role: {name: r, tasks_from: sub/../other.yml}
    - include_tasks: file=outside.yml
    - import_tasks: outside.yml
"""


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_as_ansible_core_refuses_it(tmp_path, case):
    body, ansible_says, fleetops_says = REFUSED[case]
    marker = tmp_path / "contacted"
    oracle.write_project(tmp_path, HEAD.format(marker=marker) + body.replace("@DIR@", str(tmp_path)), INVENTORY, FILES)
    ans = oracle.run_project(tmp_path)
    out = ans.stdout + ans.stderr
    assert ans.returncode != 0 and ansible_says in out, out[-2000:]
    origin = re.search(r"Origin: .*/pb\.yml:(\d+):", out)
    marker.unlink(missing_ok=True)
    p = fleetops("run", "pb.yml", "-i", "inv.yml", cwd=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 4 and len(lines) == 1 and fleetops_says in lines[0], p.stderr
    at = re.match(r"fleetops: error: pb\.yml:(\d+):", lines[0])
    assert at and (origin is None or at.group(1) == origin.group(1)), (lines, out[-600:])
    assert not marker.exists()


def test_free_form_role_and_task_includes_read_as_ansible_core(tmp_path):
    want = oracle.playbook_messages(tmp_path / "ansible", ACCEPTED, INVENTORY, FILES)
    outcome, rec = run_yaml(tmp_path, ACCEPTED, inventory=INVENTORY, files=FILES)
    assert outcome.exit_code == 0, rec.failures()
    # ansible-core's "included:" line has no msg
    assert messages(rec, keep=lambda t: not t.startswith("include_")) == want
    assert want["r main"] == {"h1": "r main from extra"} and want["outside"] == {"h1": "outside"}
