"""`add_host`, compared with ansible-playbook: a new host with groups and variables, a
`host:port` name, an inventory host put in a new group (changed) and again (not changed), a
loop adding several, and the plays after it: which hosts `hosts: <new group>` and `ungrouped`
select, their `group_names` and the variables they were given; the result registered on the
first host only (ansible-core's bypass of the host loop). Every debug line of both runs."""
from __future__ import annotations

import json

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = ("all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"
             "    h2: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n")
LOCAL = "ansible_connection: local, ansible_python_interpreter: /usr/bin/python3"
PLAYBOOK = f"""
- hosts: all
  gather_facts: false
  tasks:
    - name: new host
      add_host: {{name: new1, groups: [g1, g2], foo: one, {LOCAL}}}
      register: r
    - {{name: new host changed, debug: {{msg: "{{{{ r.changed }}}} {{{{ r.add_host }}}}"}}, when: r is defined}}
    - name: host and port
      add_host: {{name: "new2:2222", groups: "g2, g3", {LOCAL}}}
      register: r
    - {{name: port changed, debug: {{msg: "{{{{ r.changed }}}} {{{{ r.add_host }}}}"}}, when: r is defined}}
    - name: an inventory host into a group
      add_host: {{name: h2, group: g1}}
      register: r
    - {{name: group changed, debug: {{msg: "{{{{ r.changed }}}}"}}, when: r is defined}}
    - name: the same again
      add_host: {{name: h2, group: g1}}
      register: r
    - {{name: again changed, debug: {{msg: "{{{{ r.changed }}}}"}}, when: r is defined}}
    - name: a loop
      add_host: {{name: "{{{{ item }}}}", {LOCAL}}}
      loop: [l1, l2]
      register: r
    - {{name: loop changed, debug: {{msg: "{{{{ r.changed }}}} {{{{ r.results | map(attribute='changed') | list }}}}"}}, when: r is defined}}

- hosts: g1
  gather_facts: false
  tasks:
    - debug: {{msg: "g1 {{{{ inventory_hostname }}}} {{{{ group_names }}}} {{{{ foo | default('-') }}}}"}}

- hosts: g2
  gather_facts: false
  tasks:
    - debug: {{msg: "g2 {{{{ inventory_hostname }}}} {{{{ ansible_ssh_port | default('-') }}}}"}}

- hosts: ungrouped
  gather_facts: false
  tasks:
    - debug: {{msg: "ungrouped {{{{ inventory_hostname }}}} {{{{ group_names }}}}"}}
"""


def _ansible_lines(stdout: str) -> list:
    out = []
    for line in stdout.splitlines():
        if line.startswith("ok: [") and " => " in line:
            host = line[5:line.index("]")]
            res = json.loads(line.split(" => ", 1)[1])
            if "msg" in res:
                out.append((host, str(res["msg"])))
    return sorted(out)


def test_add_host_as_ansible_core(tmp_path):
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    p = oracle.run("ansible-playbook", "-v", "-i", "inv.yml", "pb.yml", cwd=str(tmp_path),
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False"})
    assert p.returncode == 0, p.stdout[-3000:]
    want = _ansible_lines(p.stdout)
    run = fleetops("run", "pb.yml", "-i", "inv.yml", "--json", "--results", tmp_path / "runs", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    got = sorted((host, str(r["result"]["msg"])) for play in json.loads(run.stdout)["plays"] for t in play["tasks"]
                 if t.get("module") == "debug" for host, r in t["results"].items() if not r["result"].get("skipped"))
    assert got == want
    assert ("new1", "g1 new1 ['g1', 'g2'] one") in want and ("l1", "ungrouped l1 ['ungrouped']") in want
