"""delegate_to an inventory host (also `"{{ item }}"` in a loop) on the lab: the task runs over the
delegate's own SSH connection (its user, its home) with the original host's variables, as in
Ansible; a delegate that is not in the inventory is refused before the run or fails that task."""
from __future__ import annotations

import pytest

from fleetops.engine.inventory import load_inventory
from fleetops.engine.playbook import load_playbook
from fleetops.engine.validate import validate
from fleetops.errors import BadInput
from fleetops.extensions import registry
from tests.lab.engine.test_executor import lab_run

pytestmark = pytest.mark.lab


def test_delegate_to_each_item_runs_there(lab_clean, tmp_path):
    names = [h["name"] for h in lab_clean.hosts]
    users = {h["name"]: h["user"] for h in lab_clean.hosts}
    outcome, rec = lab_run(tmp_path, lab_clean, """
        - hosts: %s
          gather_facts: false
          tasks:
            - name: on each
              shell: "echo {{ inventory_hostname }} $(whoami)"
              delegate_to: "{{ item }}"
              loop: "{{ groups['lab'] }}"
            - name: fixed
              shell: whoami
              delegate_to: %s
    """ % (names[0], names[1]))
    assert outcome.exit_code == 0, rec.failures()
    items = rec.results("on each")[names[0]]["results"]
    assert [r["stdout"] for r in items] == [f"{names[0]} {users[n]}" for n in names]
    assert rec.results("fixed")[names[0]]["stdout"] == users[names[1]]


def test_a_delegate_not_in_the_inventory(lab_clean, tmp_path):
    pb = tmp_path / "pb.yml"
    pb.write_text("- hosts: lab\n  tasks:\n    - command: 'true'\n      delegate_to: nowhere\n")
    with pytest.raises(BadInput) as exc:
        validate(load_playbook(str(pb), registry().modules), load_inventory(lab_clean.inventory_path), {}, registry().modules)
    assert "delegate_to 'nowhere' is not a host of the inventory" in exc.value.msg
    assert exc.value.where.endswith("pb.yml:4:7")
    outcome, rec = lab_run(tmp_path, lab_clean, """
        - hosts: lab
          gather_facts: false
          tasks:
            - name: templated
              command: "true"
              delegate_to: "{{ 'no' ~ 'where' }}"
    """)
    assert outcome.exit_code == 3
    assert all("not a host of the inventory" in r["msg"] for r in rec.results("templated").values())
