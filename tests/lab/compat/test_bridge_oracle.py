"""Modules fleetops has no native version of, through the ansible-core module bridge, over real
SSH with become to another (unprivileged) user, run by ansible-core 2.19 and by fleetops: a file
only that user can read is slurped, edited by replace and blockinfile, a new one created (its
owner and mode looked at), and getent's fact read; every result the same. Then what fleetops
alone promises: the module ran without leaving anything on the host."""
from __future__ import annotations

import glob
import os
import pwd

from tests.lab.compat.test_environment_oracle import become_rule  # noqa: F401 - the NOPASSWD rule, a fixture
from tests.support import lab_parity, oracle

import pytest

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh")]

said = lab_parity.task_and_said

PLAYBOOK = """
- name: bridged modules with become
  hosts: lab[0]
  gather_facts: false
  become: true
  become_user: "@OTHER@"
  tasks:
""" + said("slurp", """      slurp: {src: "@HOME@/fo-bridge.txt"}
""", "{{ r.content | b64decode }}") + said("replace", """      replace: {path: "@HOME@/fo-bridge.txt", regexp: foo, replace: baz}
""", "{{ r.changed }} {{ r.msg }}") + said("blockinfile", """      ansible.builtin.blockinfile: {path: "@HOME@/fo-bridge.txt", block: "k=v"}
""", "{{ r.changed }} {{ r.msg }}") + said("blockinfile creates", """      blockinfile: {path: "@HOME@/fo-bridge-new.txt", block: "n=1", create: true, mode: "0640"}
""", "{{ r.changed }} {{ r.msg }}") + said("its owner", """      stat: {path: "@HOME@/fo-bridge-new.txt"}
""", "{{ r.stat.pw_name }} {{ r.stat.mode }}") + said("getent", """      getent: {database: passwd, key: "@OTHER@"}
""", "{{ getent_passwd['@OTHER@'][4] }}") + said("slurp again", """      slurp: {src: "@HOME@/fo-bridge.txt"}
""", "{{ r.content | b64decode }}")


def test_bridged_modules_over_ssh_with_become(lab_clean, become_rule, tmp_path):  # noqa: F811
    user = become_rule
    home = pwd.getpwnam(user).pw_dir
    entry = pwd.getpwnam(user)
    target = os.path.join(home, "fo-bridge.txt")
    text = PLAYBOOK.replace("@OTHER@", user).replace("@HOME@", home)
    name = lab_clean.hosts[0]["name"]
    # pipelining, as becoming an unprivileged user needs with ansible-core
    py = {name: {"ansible_python_interpreter": "/usr/bin/python3", "ansible_pipelining": True}}
    results, left = {}, {}
    for who in ("ansible", "fleetops"):
        for leftover in (target, os.path.join(home, "fo-bridge-new.txt")):
            if os.path.exists(leftover):
                os.unlink(leftover)
        with open(target, "w") as fh:
            fh.write("hello\nfoo bar\n")
        os.chown(target, entry.pw_uid, entry.pw_gid)
        os.chmod(target, 0o600)
        d = lab_parity.write_project(tmp_path / who, {"site.yml": text})
        inv = lab_parity.lab_inventory(lab_clean, os.path.join(d, "inv.yml"), py)
        pb = os.path.join(d, "site.yml")
        before = set(glob.glob("/tmp/fleetops-ansible-*") + glob.glob("/tmp/ansible_*_payload_*"))
        results[who] = (lab_parity.ansible_results(pb, inv, lab_clean.known_hosts_path) if who == "ansible"
                        else lab_parity.fleetops_results(pb, inv))
        left[who] = set(glob.glob("/tmp/fleetops-ansible-*") + glob.glob("/tmp/ansible_*_payload_*")) - before
        with open(target) as fh:
            results[who]["file"] = fh.read()
    # what each module returned, as the "said" tasks show it (ansible-playbook prints a result
    # that is only a message as that message; fleetops' results carry the module's invocation)
    saids = {who: {k: v for k, v in r.items() if k == "file" or k[0].endswith(" said")} for who, r in results.items()}
    assert saids["fleetops"] == saids["ansible"]
    outcomes = {who: {k: [o for o, _m in v] for k, v in r.items() if k != "file"} for who, r in results.items()}
    assert outcomes["fleetops"] == outcomes["ansible"]
    shown = results["fleetops"]
    assert shown[("slurp said", name)] == [("ok", "hello\nfoo bar\n")]
    assert shown[("replace said", name)] == [("ok", "True 1 replacements made")]
    assert shown[("blockinfile creates said", name)] == [("ok", "True File created and ownership, perms or SE linux context changed")]
    assert shown[("its owner said", name)] == [("ok", f"{user} 0640")]
    assert shown[("getent said", name)] == [("ok", home)]
    assert shown["file"] == "hello\nbaz bar\n# BEGIN ANSIBLE MANAGED BLOCK\nk=v\n# END ANSIBLE MANAGED BLOCK\n"
    assert left["fleetops"] == set()
    for leftover in (target, os.path.join(home, "fo-bridge-new.txt")):
        os.unlink(leftover)
