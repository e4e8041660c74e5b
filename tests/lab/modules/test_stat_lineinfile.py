"""`stat` and `lineinfile` on the lab: real sshd hosts, payloads over SSH, results read back from
the hosts' disks (their decisions are compared with ansible-core's own modules in
tests/scenario/compat/test_module_oracle.py)."""
from __future__ import annotations

import os

import pytest

from tests.lab.engine.test_executor import homes, lab_run, snapshot

pytestmark = pytest.mark.lab

PLAY = """
- hosts: lab
  gather_facts: false
  tasks:
    - file: {path: "~/.fleetops-exec", state: directory}
    - name: before
      stat: {path: "~/.fleetops-exec/app.conf", get_checksum: false}
      register: pre
    - name: conf
      when: not pre.stat.exists
      copy: {dest: "~/.fleetops-exec/app.conf", content: "port=80\\n#debug=1\\nuser={{ inventory_hostname }}\\n", mode: "0640"}
    - name: port
      lineinfile: {dest: "~/.fleetops-exec/app.conf", regexp: "^port=", line: "port=8080", backup: true}
    - name: debug
      lineinfile: {path: "~/.fleetops-exec/app.conf", line: "debug=0", insertafter: "^#debug"}
    - name: drop comment
      lineinfile: {path: "~/.fleetops-exec/app.conf", regexp: "^#", state: absent}
    - name: look
      stat: {path: "~/.fleetops-exec/app.conf"}
      register: st
    - name: missing
      stat: {path: "~/.fleetops-exec/nothing"}
      register: gone
    - name: only when present
      debug: {msg: "{{ st.stat.mode }} {{ st.stat.size }} {{ st.stat.isreg }} {{ gone.stat.exists }}"}
      when: st.stat.exists and not gone.stat.exists
"""


def test_lineinfile_and_stat_on_lab(lab_clean, tmp_path):
    first, rec = lab_run(tmp_path, lab_clean, PLAY)
    assert first.exit_code == 0, rec.failures()
    users = {h["name"]: h["user"] for h in lab_clean.hosts}
    for name, home in homes(lab_clean).items():
        path = os.path.join(home, ".fleetops-exec", "app.conf")
        assert open(path).read() == f"port=8080\ndebug=0\nuser={name}\n"
        assert os.stat(path).st_mode & 0o777 == 0o640            # the file's mode kept
        backups = [f for f in os.listdir(os.path.dirname(path)) if f.startswith("app.conf.") and f.endswith("~")]
        assert len(backups) == 1
        assert open(os.path.join(os.path.dirname(path), backups[0])).read().startswith("port=80\n")
        res = rec.results("port")[name]
        assert res["changed"] and res["msg"] == "line replaced" and res["backup"].endswith(backups[0])
        assert rec.results("drop comment")[name]["found"] == 1
        look = rec.results("look")[name]["stat"]
        assert look["exists"] and look["mode"] == "0640" and look["size"] == len(f"port=8080\ndebug=0\nuser={name}\n")
        assert look["pw_name"] == users[name] and len(look["checksum"]) == 40
        assert rec.results("only when present")[name]["msg"] == f"0640 {look['size']} True False"
    before = snapshot(lab_clean)
    second, rec2 = lab_run(tmp_path, lab_clean, PLAY)
    assert second.exit_code == 0, rec2.failures()
    assert {h: s["changed"] for h, s in second.stats.items()} == {h: 0 for h in homes(lab_clean)}
    assert snapshot(lab_clean) == before                           # no second backup, nothing rewritten


def test_lineinfile_check_mode_on_lab_changes_nothing(lab_clean, tmp_path):
    setup, rec = lab_run(tmp_path, lab_clean, PLAY)
    assert setup.exit_code == 0, rec.failures()
    before = snapshot(lab_clean)
    play = PLAY.replace('regexp: "^port=", line: "port=8080"', 'regexp: "^port=", line: "port=9"')
    out, rec2 = lab_run(tmp_path, lab_clean, play, check=True)
    assert out.exit_code == 0, rec2.failures()
    assert all(r["changed"] for r in rec2.results("port").values())
    assert snapshot(lab_clean) == before
