"""A templated import name against ansible-playbook: play variables and import_playbook's vars
name the file or role before the run, in both; a host variable cannot (both refuse the play)."""
from __future__ import annotations

import textwrap

import pytest

from fleetops.errors import BadInput
from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

FILES = {
    "debian.yml": "- {name: from_file, debug: {msg: \"debian file\"}}\n",
    "roles/web/tasks/main.yml": "- {name: from_role, debug: {msg: \"web role\"}}\n",
    "roles/web/tasks/extra.yml": "- {name: from_entry, debug: {msg: \"web extra\"}}\n",
}
INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local, per_host: debian}\n"
PLAY_VARS = """
- hosts: h1
  gather_facts: false
  vars: {family: debian, role: web, entry: extra}
  tasks:
    - import_tasks: "{{ family }}.yml"
    - import_role: {name: "{{ role }}"}
    - import_role: {name: web, tasks_from: "{{ entry }}"}
"""
HOST_VAR = """
- hosts: h1
  gather_facts: false
  tasks:
    - import_tasks: "{{ per_host }}.yml"
"""


def test_play_vars_name_an_import_as_in_ansible_core(tmp_path):
    want = oracle.playbook_messages(tmp_path / "ansible", PLAY_VARS, INVENTORY, FILES)
    outcome, rec = run_yaml(tmp_path, PLAY_VARS, inventory=INVENTORY, files=FILES)
    assert outcome.exit_code == 0, rec.failures()
    got = {t.split(" : ")[-1]: {h: r["msg"]} for h, t, r in rec.results()}
    assert got == want == {"from_file": {"h1": "debian file"}, "from_role": {"h1": "web role"},
                           "from_entry": {"h1": "web extra"}}


def test_a_host_variable_cannot_name_an_import_in_either(tmp_path):
    with pytest.raises(AssertionError) as refused:          # ansible-playbook's run fails
        oracle.playbook_messages(tmp_path / "ansible", HOST_VAR, INVENTORY, FILES)
    assert "per_host" in str(refused.value)
    with pytest.raises(BadInput) as exc:
        run_yaml(tmp_path, textwrap.dedent(HOST_VAR), inventory=INVENTORY, files=FILES)
    assert "can use play variables only" in exc.value.msg and "per_host" in exc.value.msg
