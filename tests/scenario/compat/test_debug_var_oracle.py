"""`debug: var=` as ansible-playbook gives it: an undefined name is shown as not defined, an
expression whose filter fails fails the task."""
from __future__ import annotations

import pytest

from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

PLAYBOOK = """
- hosts: h1
  gather_facts: false
  tasks:
    - {debug: {var: "nope_undefined"}, register: r1, ignore_errors: true}
    - {debug: {var: "'http://h/x' | urlsplit('bad_part')"}, register: r2, ignore_errors: true}
    - {name: outcome, debug: {msg: "{{ r1 is failed }} {{ r2 is failed }}"}}
"""
INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local}\n"


def test_debug_var_fails_as_ansible_playbook(tmp_path):
    want = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY)
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY)
    assert outcome.exit_code == 0, rec.failures()
    assert rec.results("outcome")["h1"]["msg"] == want["outcome"]["h1"] == "False True"
