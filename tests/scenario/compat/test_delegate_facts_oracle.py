"""delegate_facts: facts a delegated task sets go to the delegate, not to the host it ran for;
compared with ansible-playbook on the same local hosts (also with delegate_to an item of a loop)."""
from __future__ import annotations

import pytest

from fleetops.errors import BadInput
from fleetops.engine.playbook import load_playbook
from fleetops.extensions import registry
from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = """
all:
  vars: {ansible_connection: local}
  hosts: {h1: {}, h2: {}, h3: {}}
"""
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  tasks:
    - set_fact: {given: "from {{ inventory_hostname }}"}
      delegate_to: h2
      delegate_facts: true
    - set_fact: {kept: "mine"}
      delegate_to: h3
    - set_fact: {each: "{{ item }} by {{ inventory_hostname }}"}
      delegate_to: "{{ item }}"
      delegate_facts: true
      loop: [h2, h3]
- hosts: all
  gather_facts: false
  tasks:
    - name: seen
      debug: {msg: "{{ given | default('-') }} {{ kept | default('-') }} {{ each | default('-') }}"}
"""


def test_delegate_facts_as_ansible_playbook(tmp_path):
    want = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY)["seen"]
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY)
    assert outcome.exit_code == 0, rec.failures()
    assert {h: r["msg"] for h, r in rec.results("seen").items()} == want
    assert want["h2"].startswith("from h1")


def test_delegate_facts_without_delegate_to(tmp_path):
    pb = tmp_path / "pb.yml"
    pb.write_text("- hosts: all\n  tasks:\n    - set_fact: {a: 1}\n      delegate_facts: true\n")
    with pytest.raises(BadInput) as exc:
        load_playbook(str(pb), registry().modules)
    assert "delegate_facts needs a delegate_to" in exc.value.msg and exc.value.where.endswith("pb.yml:4:7")
