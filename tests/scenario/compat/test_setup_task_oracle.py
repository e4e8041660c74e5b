"""`setup` (with `filter`, `gather_subset`) and `gather_facts` as tasks in a play that does not
gather: the facts they set, by their prefixed names and under `ansible_facts`, compared with
ansible-playbook on the same playbook."""
from __future__ import annotations

import sys

import pytest

from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = f"all:\n  hosts:\n    h1: {{ansible_connection: local, ansible_python_interpreter: {sys.executable}}}\n"
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  tasks:
    - {name: before, debug: {msg: "{{ ansible_os_family is defined }} {{ ansible_facts.keys() | list | length }}"}}
    - setup: {filter: [ansible_os_family, "ansible_distribution*"], gather_subset: [min]}
    - {name: filtered, debug: {msg: "{{ ansible_os_family }} {{ ansible_facts.os_family }} {{ ansible_distribution_major_version }}"}}
    - {name: left_out, debug: {msg: "{{ ansible_kernel is defined }} {{ ansible_facts.kernel is defined }}"}}
    - setup: {filter: ansible_system}
    - {name: added, debug: {msg: "{{ ansible_system }} {{ ansible_facts.system }} {{ ansible_os_family }}"}}
    - gather_facts:
    - {name: gathered, debug: {msg: "{{ ansible_facts.architecture }} {{ ansible_machine }} {{ ansible_kernel is defined }}"}}
"""
TASKS = ("before", "filtered", "left_out", "added", "gathered")


def test_setup_and_gather_facts_tasks_as_ansible_playbook(tmp_path):
    want = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY)
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY)
    assert outcome.exit_code == 0, rec.failures()
    got = {t: rec.results(t)["h1"]["msg"] for t in TASKS}
    assert got == {t: want[t]["h1"] for t in TASKS}
