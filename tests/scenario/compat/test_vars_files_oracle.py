"""`vars_files` with a list of alternatives (the first of its files that exists is read, as
ansible-core reads it), compared with ansible-playbook; one none of whose files exists is refused
before the run, where ansible-core reads nothing and the play fails later on an undefined name."""
from __future__ import annotations

import json

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local}\n"
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  vars_files:
    - vars/common.yml
    - [vars/missing.yml, vars/second.yml, vars/third.yml]
    - [vars/third.yml]
  tasks:
    - name: show
      debug: {msg: "{{ common }} {{ picked }} {{ last }}"}
"""
FILES = {"vars/common.yml": "common: c\n", "vars/second.yml": "picked: second\nlast: second\n",
         "vars/third.yml": "last: third\n"}


def test_the_first_existing_alternative_is_read_as_ansible_core_reads_it(tmp_path):
    want = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY, FILES)["show"]["h1"]
    for rel, text in {**FILES, "inv.yml": INVENTORY, "pb.yml": PLAYBOOK}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    p = fleetops("run", "pb.yml", "-i", "inv.yml", "--json", "--results", tmp_path / "runs", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)["plays"][0]["tasks"][0]["results"]["h1"]["result"]["msg"]
    assert got == want == "c second third"


def test_no_alternative_existing_is_refused_at_its_line(tmp_path):
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    p = fleetops("run", "pb.yml", "-i", "inv.yml", "--results", tmp_path / "runs", cwd=tmp_path)
    assert p.returncode == 4
    assert p.stderr.strip() == ("fleetops: error: pb.yml:6:7: none of the vars_files alternatives exists: "
                                "vars/missing.yml, vars/second.yml, vars/third.yml")
