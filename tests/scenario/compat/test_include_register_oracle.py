"""`register` on a dynamic include against ansible-playbook on a local host: a skipped include
(its `when` false before a loop that cannot render) and a looped one's `results`."""
from __future__ import annotations

import pytest

from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

FILES = {"each.yml": "- {name: inside, debug: {msg: \"{{ item }}\"}}\n"}
INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  tasks:
    - name: skipped
      include_tasks: each.yml
      loop: "{{ not_defined_anywhere }}"
      when: false
      register: skipped_include
    - name: looped
      include_tasks: each.yml
      loop: [a, b]
      register: looped
    - name: show
      debug:
        msg: >-
          {{ skipped_include is skipped }} {{ skipped_include.results is undefined }}
          {{ looped.results | map(attribute='item') | join(',') }} {{ looped.results | map(attribute='include') | join(',') }}
          {{ looped.msg }} {{ looped is changed }}
"""


def test_register_on_an_include_as_ansible_core(tmp_path):
    want = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY, FILES)
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY, files=FILES)
    assert outcome.exit_code == 0, rec.failures()
    got: dict = {}
    for h, t, r in rec.results():
        if "msg" in r and t in want:
            got.setdefault(t, {})[h] = r["msg"]
    assert got == {t: want[t] for t in ("inside", "show")}
    assert want["show"]["h1"] == "True True a,b each.yml,each.yml All items completed False"
