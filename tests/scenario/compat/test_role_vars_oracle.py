"""Role vars and defaults are the whole play's (pre_tasks and tasks after the role too, not the
next play), for `roles:` and import_role, not for a private include_role: compared with
ansible-playbook on the same files."""
from __future__ import annotations


import pytest

from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

FILES = {
    "roles/r/vars/main.yml": "rvar: from_r_vars\n",
    "roles/r/defaults/main.yml": "rdef: from_r_defaults\nshared: r_default\n",
    "roles/r/tasks/main.yml": "- {name: in_r, debug: {msg: \"{{ rvar }} {{ shared }}\"}}\n",
    "roles/s/vars/main.yml": "svar: from_s_vars\n",
    "roles/s/tasks/main.yml": "- {name: in_s, debug: {msg: \"{{ svar }}\"}}\n",
    "roles/p/vars/main.yml": "pvar: from_p_vars\n",
    "roles/p/tasks/main.yml": "- {name: in_p, debug: {msg: \"{{ pvar }}\"}}\n",
}
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  vars: {rvar: from_play, shared: from_play}
  pre_tasks:
    - {name: pre, debug: {msg: "{{ rvar }} {{ rdef | default('undef') }} {{ shared }}"}}
  roles: [r]
  tasks:
    - {name: after, debug: {msg: "{{ rvar }} {{ rdef }} {{ svar | default('undef') }}"}}
    - {name: imp, import_role: {name: s}}
    - {name: inc, include_role: {name: p}}
    - {name: after_include, debug: {msg: "{{ svar | default('undef') }} {{ pvar | default('undef') }}"}}
    - {name: task_vars_win, debug: {msg: "{{ rvar }}"}, vars: {rvar: from_task}}
  post_tasks:
    - {name: post, debug: {msg: "{{ rvar }} {{ svar | default('undef') }}"}}
- hosts: h1
  gather_facts: false
  tasks:
    - {name: next_play, debug: {msg: "{{ rvar | default('undef') }}"}}
"""
INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local}\n"
TASKS = ("pre", "in_r", "after", "in_s", "in_p", "after_include", "task_vars_win", "post", "next_play")


def _ansible(tmp_path) -> dict:
    got = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY, FILES)
    return {t: by_host["h1"] for t, by_host in got.items()}


def test_role_vars_reach_as_ansible_playbook(tmp_path):
    want = _ansible(tmp_path)
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY, files=FILES)
    assert outcome.exit_code == 0, rec.failures()
    got = {}
    for t in TASKS:
        found = rec.results(t) or next((rec.results(n) for n in ("r : " + t, "s : " + t, "p : " + t)
                                        if rec.results(n)), {})
        got[t] = found["h1"]["msg"]
    assert got == {t: want[t] for t in TASKS}
