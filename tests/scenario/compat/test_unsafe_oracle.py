"""`!unsafe` values are data, never templates, in playbooks and inventories: compared with
ansible-playbook on the same files (a value that would fail to render if templated must come out
as written)."""
from __future__ import annotations


import pytest

from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = """
all:
  hosts:
    h1:
      ansible_connection: local
      inv_raw: !unsafe "{{ lookup('pipe', 'id') }} {% if %}"
"""
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  vars:
    raw: !unsafe "{{ not_defined }} {% x %}"
    through: "{{ raw }} and {{ inv_raw }}"
  tasks:
    - name: var
      debug: {msg: "{{ raw }}"}
    - name: inline
      debug: {msg: !unsafe "{{ literal }}"}
    - name: inventory
      debug: {msg: "{{ inv_raw }}"}
    - name: nested
      debug: {msg: "{{ through }}"}
    - name: registered
      set_fact: {again: "{{ raw }}"}
    - name: again
      debug: {msg: "{{ again }}"}
"""
TASKS = ("var", "inline", "inventory", "nested", "again")


def _ansible(tmp_path) -> dict:
    got = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY)
    return {t: by_host["h1"] for t, by_host in got.items()}


def test_unsafe_as_ansible_playbook(tmp_path):
    want = _ansible(tmp_path)
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY)
    assert outcome.exit_code == 0, rec.failures()
    got = {t: rec.results(t)["h1"]["msg"] for t in TASKS}
    assert got == {t: want[t] for t in TASKS}
    assert got["var"] == "{{ not_defined }} {% x %}"
