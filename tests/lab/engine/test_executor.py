"""Acceptance on the lab: real sshd hosts, the SSH transport, payloads over SSH stdin.

Every test works under ~/.fleetops-exec on the lab users, which `lab_clean`
wipes first; results that matter are checked on the hosts' disks directly.
"""
from __future__ import annotations

import os
import socket
import threading

import pytest
import yaml

from fleetops.engine.connection.ssh import SSHTransport
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.lab


def lab_run(tmp_path, lab, playbook, inventory=None, **kw):
    return run_yaml(tmp_path, playbook, inventory=inventory or open(lab.inventory_path).read(),
                    transport_factory=SSHTransport, **kw)


def homes(lab) -> dict:
    return {h["name"]: h["home"] for h in lab.hosts}


def snapshot(lab) -> dict:
    """Every file and directory in the lab homes except ~/.ssh: path -> (mode, bytes)."""
    out = {}
    for _name, home in homes(lab).items():
        for root, dirs, files in os.walk(home):
            dirs[:] = [d for d in dirs if not (root == home and d == ".ssh")]
            for entry in dirs + files:
                p = os.path.join(root, entry)
                st = os.lstat(p)
                data = open(p, "rb").read() if os.path.isfile(p) and not os.path.islink(p) else None
                out[p] = (st.st_mode, data)
    return out


def batch_sizes(rec, play_index=0):
    return [len(e[2]) for e in rec.of("batch_start") if e[0] == play_index]


def test_serial_lists_and_percentages(lab_clean, tmp_path):
    outcome, rec = lab_run(tmp_path, lab_clean, """
        - hosts: lab
          gather_facts: false
          serial: [1, "50%"]
          tasks:
            - {name: ping, command: "true"}
        - hosts: lab
          gather_facts: false
          serial: "25%"
          tasks:
            - {name: ping2, command: "true"}
    """)
    assert outcome.exit_code == 0, rec.failures()
    assert batch_sizes(rec, 0) == [1, 4, 3]
    assert batch_sizes(rec, 1) == [2, 2, 2, 2]
    batches = [e[2] for e in rec.of("batch_start") if e[0] == 0]
    assert [h for b in batches for h in b] == sorted(homes(lab_clean))
    # linear within a batch: the task ran on all 8 hosts, once each
    assert sorted(rec.results("ping")) == sorted(homes(lab_clean))


def test_max_fail_percentage_stops_before_next_batch(lab_clean, tmp_path):
    outcome, rec = lab_run(tmp_path, lab_clean, """
        - hosts: lab
          gather_facts: false
          serial: 4
          max_fail_percentage: 25
          tasks:
            - {name: fail lab01, command: "test {{ inventory_hostname }} != lab01"}
        - hosts: lab
          gather_facts: false
          serial: 2
          max_fail_percentage: 40
          tasks:
            - {name: fail lab03, command: "test {{ inventory_hostname }} != lab03"}
            - {name: second task, command: "true"}
    """)
    # play 1: 1 of 4 = 25% is not greater than 25: both batches run
    assert batch_sizes(rec, 0) == [4, 4]
    # play 2 (lab01 excluded as failed): batch [lab02, lab03] has 50% > 40%: stop there
    assert [e[2] for e in rec.of("batch_start") if e[0] == 1] == [["lab02", "lab03"]]
    assert sorted(rec.results("second task")) == ["lab02"]
    reasons = [e[1] for e in rec.of("play_end")]
    assert reasons[0] is None and reasons[1].startswith("max_fail_percentage exceeded")
    assert outcome.exit_code == 2 and outcome.status == "failed"
    assert outcome.stats["lab04"]["ok"] == 1          # only its play-1 task; play 2 never reached it


def test_any_errors_fatal_on_lab(lab_clean, tmp_path):
    outcome, rec = lab_run(tmp_path, lab_clean, """
        - hosts: lab
          gather_facts: false
          any_errors_fatal: true
          tasks:
            - {name: fail lab05, command: "test {{ inventory_hostname }} != lab05"}
            - {name: marker, file: {path: ~/.fleetops-exec-marker, state: touch}}
    """)
    assert outcome.exit_code == 2
    assert "marker" not in rec.task_names()
    assert not any(os.path.exists(os.path.join(h, ".fleetops-exec-marker")) for h in homes(lab_clean).values())


FILES_PLAY = """
- hosts: lab
  gather_facts: true
  vars:
    greeting: hello
  tasks:
    - name: dir
      file: {path: ~/.fleetops-exec, state: directory}
    - name: copy
      copy: {content: "{{ greeting }} {{ inventory_hostname }}\\n", dest: ~/.fleetops-exec/greeting.txt}
    - name: template
      template: {src: conf.j2, dest: ~/.fleetops-exec/app.conf, mode: "0640"}
    - name: gone
      file: {path: ~/.fleetops-exec/old, state: absent}
"""
FILES = {"templates/conf.j2": "user={{ ansible_facts.user_id | default(ansible_user) }}\nhost={{ inventory_hostname }}\n"}


def test_check_mode_changes_nothing_on_hosts(lab_clean, tmp_path):
    for home in homes(lab_clean).values():
        os.makedirs(os.path.join(home, ".fleetops-exec", "old"))   # root-owned is fine: nothing may touch it
    before = snapshot(lab_clean)
    outcome, rec = lab_run(tmp_path, lab_clean, FILES_PLAY + """
    - name: cmd
      command: touch ~/.fleetops-exec/cmd
""", files=FILES, check=True, diff=True)
    assert outcome.exit_code == 0, rec.failures()
    assert snapshot(lab_clean) == before
    assert rec.results("copy")["lab01"]["changed"] and "+hello lab01" in rec.results("copy")["lab01"]["diff"]
    assert rec.results("gone")["lab02"]["changed"]
    assert rec.results("cmd")["lab03"]["skipped"]


def test_copy_template_file_idempotent_with_diff(lab_clean, tmp_path):
    first, rec1 = lab_run(tmp_path, lab_clean, FILES_PLAY, files=FILES, diff=True)
    assert first.exit_code == 0, rec1.failures()
    for name, home in homes(lab_clean).items():
        path = os.path.join(home, ".fleetops-exec", "greeting.txt")
        assert open(path).read() == f"hello {name}\n"
        assert oct(os.stat(path).st_mode & 0o777) == oct(0o600)
        conf = os.path.join(home, ".fleetops-exec", "app.conf")
        assert f"host={name}\n" in open(conf).read() and os.stat(conf).st_mode & 0o777 == 0o640
    assert first.stats["lab01"]["changed"] == 3        # dir, copy, template (absent was already absent)
    assert "+host=lab01" in rec1.results("template")["lab01"]["diff"]
    second, rec2 = lab_run(tmp_path, lab_clean, FILES_PLAY, files=FILES, diff=True)
    assert second.exit_code == 0
    assert {h: s["changed"] for h, s in second.stats.items()} == {h: 0 for h in homes(lab_clean)}


def test_fetch_from_lab_hosts(lab_clean, tmp_path):
    outcome, rec = lab_run(tmp_path, lab_clean, """
        - hosts: lab
          gather_facts: false
          tasks:
            - copy: {content: "{{ inventory_hostname }}\\n", dest: ~/.fleetops-exec-f.txt}
            - name: fetch it
              fetch: {src: .fleetops-exec-f.txt, dest: f.txt}
    """)
    assert outcome.exit_code == 0, rec.failures()
    for name in homes(lab_clean):
        assert (tmp_path / "runs" / "run-test" / name / "f.txt").read_text() == f"{name}\n"


def test_unreachable_host_exit_3(lab_clean, tmp_path):
    inv = yaml.safe_load(open(lab_clean.inventory_path))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                      # nothing listens there now
    inv["all"]["children"]["lab"]["hosts"]["deadhost"] = {"ansible_host": "127.0.0.1", "ansible_port": port,
                                                          "ansible_user": "nobody"}
    outcome, rec = lab_run(tmp_path, lab_clean, """
        - hosts: lab
          gather_facts: false
          tasks:
            - {name: one, command: "true"}
            - {name: two, command: "true"}
    """, inventory=yaml.safe_dump(inv))
    assert outcome.exit_code == 3 and outcome.status == "unreachable"
    assert outcome.stats["deadhost"]["unreachable"] == 1
    assert rec.results("one")["deadhost"]["unreachable"] is True
    assert "deadhost" not in rec.results("two") and len(rec.results("two")) == 8


def test_stop_mid_run_is_interrupted(lab_clean, tmp_path):
    stop = threading.Event()

    def on_result(host, pi, ti, task_name, *rest):
        if task_name == "slow":
            stop.set()

    outcome, rec = lab_run(tmp_path, lab_clean, """
        - hosts: lab
          gather_facts: false
          tasks:
            - {name: slow, command: sleep 0.3}
            - {name: after, file: {path: ~/.fleetops-exec-after, state: touch}}
    """, stop=stop, hooks={"host_result": on_result})
    assert outcome.status == "interrupted" and outcome.exit_code == 130
    assert len(rec.results("slow")) == 8          # tasks already running were let finish
    assert "after" not in rec.task_names()
    assert not any(os.path.exists(os.path.join(h, ".fleetops-exec-after")) for h in homes(lab_clean).values())
