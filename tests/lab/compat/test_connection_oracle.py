"""The `connection` keyword (play, block, task) and `ansible_connection`, run on the lab hosts by
ansible-core 2.19 and by fleetops: who runs each command (the controller's user for `local`, the
host's login user for `ssh`) and every result must agree, including which of the two wins when
both are set (the host variable, in ansible-core)."""
from __future__ import annotations

import getpass
import os

import pytest

from fleetops.errors import BadInput
from tests.support import lab_parity, oracle

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh")]

WHO = """
    - name: who {n}
      command: id -un
      register: who
      changed_when: false
    - name: show {n}
      debug:
        msg: "{{{{ who.stdout }}}} {{{{ inventory_hostname }}}}"
"""

PLAYBOOK = ("""
- name: the play runs locally
  hosts: lab[0:2]
  gather_facts: false
  connection: local
  tasks:
""" + WHO.format(n="play local") + """
    - name: a task back on ssh
      command: id -un
      connection: ansible.builtin.ssh
      register: back
      changed_when: false
    - name: show task ssh
      debug:
        msg: "{{ back.stdout }}"
    - name: a block run locally
      connection: local
      block:
""" + WHO.format(n="block local").replace("\n    ", "\n        ") + """
- name: the play by ssh (smart, as ansible.cfg's default)
  hosts: lab[0:2]
  gather_facts: true
  connection: smart
  tasks:
""" + WHO.format(n="play smart") + """
    - name: facts came from where the host runs
      debug:
        msg: "{{ ansible_user_id }}"
""")


def test_connection_keyword_as_ansible_core(lab_clean, tmp_path):
    names = [h["name"] for h in lab_clean.hosts[:3]]
    # host 0 says local, host 1 says ssh (both beat the keyword, as in Ansible), host 2 says nothing
    # one interpreter for both tools on both sides (the controller's PATH has pyenv shims)
    py = {"ansible_python_interpreter": "/usr/bin/python3"}
    host_vars = {names[0]: {**py, "ansible_connection": "local"}, names[1]: {**py, "ansible_connection": "ssh"},
                 names[2]: py}
    results = {}
    for who in ("ansible", "fleetops"):
        d = lab_parity.write_project(tmp_path / who, {"site.yml": PLAYBOOK})
        inv = lab_parity.lab_inventory(lab_clean, os.path.join(d, "inv.yml"), host_vars)
        pb = os.path.join(d, "site.yml")
        results[who] = (lab_parity.ansible_results(pb, inv, lab_clean.known_hosts_path) if who == "ansible"
                        else lab_parity.fleetops_results(pb, inv))
    assert results["fleetops"] == results["ansible"]
    shown = results["ansible"]
    local_user = getpass.getuser()
    users = {h["name"]: h["user"] for h in lab_clean.hosts[:3]}

    def who(task, host):
        return shown[(task, host)][0][1].split()[0]
    assert who("show play local", names[2]) == local_user            # the keyword
    assert who("show play local", names[1]) == users[names[1]]       # ansible_connection: ssh wins
    assert who("show play smart", names[0]) == local_user            # ansible_connection: local wins
    assert who("show play smart", names[2]) == users[names[2]]


@pytest.mark.parametrize("text, fragment", [
    ("  connection: docker\n", "connection 'docker' is not supported"),
    ("  connection: winrm\n", "connection 'winrm' is not supported"),
])
def test_a_connection_fleetops_lacks_is_refused_at_its_line(tmp_path, text, fragment):
    from fleetops.engine.playbook import load_playbook
    from fleetops.extensions import registry
    pb = tmp_path / "pb.yml"
    pb.write_text("- hosts: all\n" + text + "  tasks:\n    - ping:\n")
    with pytest.raises(BadInput) as exc:
        load_playbook(str(pb), registry().modules)
    assert fragment in exc.value.msg and exc.value.where.endswith(":2:15")
