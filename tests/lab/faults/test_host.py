"""Broken hosts: no python3, sudo that would prompt, a read-only filesystem, hostile output,
a payload that crashes. Each: that host fails with a clear reason, the others carry on.
"""
from __future__ import annotations

import json
import os
import time
import shutil
import subprocess

import pytest

from fleetops.engine.connection import output
from tests.support.cli_run import (by_task, chown_to, fleetops, home, report_json, start_fleetops, write,
                                   write_inventory)

pytestmark = pytest.mark.lab


@pytest.fixture
def pathless(fleet):
    """Make lab hosts' login shells run with PATH=/nonexistent (first line of their ~/.bashrc,
    which bash reads for sshd commands), restored afterwards."""
    saved = {}

    def make(i):
        rc = home(fleet, i) / ".bashrc"
        saved[rc] = rc.read_bytes() if rc.exists() else None
        rc.write_bytes(b"export PATH=/nonexistent\n" + (saved[rc] or b""))
        chown_to(fleet, i, rc)
    yield make
    for rc, data in saved.items():
        if data is None:
            rc.unlink()
        else:
            rc.write_bytes(data)


def test_host_without_python3(fleet, work, pathless):
    pathless(1)
    pathless(2)
    inv = write_inventory(work / "inv.yml", fleet, [0, 1, 2, 3], overrides={
        0: {"ansible_python_interpreter": "/nonexistent/python3"},   # a wrong path
        1: {"ansible_python_interpreter": "python3"},                # nothing called python3 on PATH
    })                                                               # 2: no PATH, discovery falls back
    pb = write(work / "pb.yml", """
- hosts: fleet
  gather_facts: true
  tasks:
    - name: after
      shell: echo "$PATH" > fault-after
""")
    proc = fleetops("run", pb, "-i", inv, "--json", "--results", work / "runs", cwd=work)
    assert proc.returncode == 2, proc.stderr
    tasks = by_task(json.loads(proc.stdout))
    facts = tasks["Gathering Facts"]
    assert facts["lab01"][0] == "failed"
    assert facts["lab01"][1]["msg"] == "no python3 on host (tried /nonexistent/python3)"
    assert facts["lab02"][0] == "failed"
    assert facts["lab02"][1]["msg"] == "no python3 on host (tried python3)"
    assert facts["lab03"][0] == "ok" and facts["lab04"][0] == "ok"
    assert sorted(tasks["after"]) == ["lab03", "lab04"]
    assert (home(fleet, 2) / "fault-after").read_text().strip() == "/nonexistent"
    assert not (home(fleet, 0) / "fault-after").exists() and not (home(fleet, 1) / "fault-after").exists()


def test_become_where_sudo_would_prompt(fleet, work):
    inv = write_inventory(work / "inv.yml", fleet, [0, 1])
    pb = write(work / "pb.yml", """
- hosts: fleet
  gather_facts: false
  tasks:
    - name: become command
      command: touch fault-as-root
      become: true
      when: inventory_hostname == 'lab01'
      ignore_errors: true
    - name: become payload
      python: {payload: sqlite_version}
      become: true
      when: inventory_hostname == 'lab01'
    - name: after
      command: touch fault-after
""")
    proc = fleetops("run", pb, "-i", inv, "--json", "--results", work / "runs", cwd=work)
    assert proc.returncode == 2, proc.stderr
    tasks = by_task(json.loads(proc.stdout))
    for name in ("become command", "become payload"):
        status, res = tasks[name]["lab01"]
        assert status in ("ignored", "failed")
        msg = res["msg"]
        assert "become failed: sudo" in msg, msg
        # sudo installed: it refuses without a password; not installed: says so
        assert "sudo: a password is required" in msg or "sudo is not installed" in msg, msg
    assert tasks["after"]["lab02"][0] == "changed" and "lab01" not in tasks["after"]
    assert not (home(fleet, 0) / "fault-as-root").exists() and not (home(fleet, 0) / "fault-after").exists()


@pytest.fixture
def readonly_dir(fleet):
    """~/fault-ro on lab01: a tmpfs with a file and a folder in it, remounted read-only."""
    mnt = home(fleet, 0) / "fault-ro"
    mnt.mkdir()
    user = fleet.hosts[0]["user"]
    uid, gid = shutil.os.stat(home(fleet, 0)).st_uid, shutil.os.stat(home(fleet, 0)).st_gid
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=1m,mode=0755,uid={uid},gid={gid}", "fleetops-fault-ro",
                    str(mnt)], check=True)
    try:
        (mnt / "existing").write_text("old\n")
        (mnt / "d").mkdir()
        for p in (mnt / "existing", mnt / "d"):
            shutil.chown(str(p), user=user, group=user)
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        shutil.rmtree(mnt, ignore_errors=True)


def test_read_only_filesystem(fleet, work, readonly_dir):
    (home(fleet, 1) / "fault-ro" / "d").mkdir(parents=True)
    (home(fleet, 1) / "fault-ro" / "existing").write_text("old\n")
    for p in ("fault-ro", "fault-ro/d", "fault-ro/existing"):
        chown_to(fleet, 1, home(fleet, 1) / p)
    before = sorted(os.listdir(readonly_dir))
    inv = write_inventory(work / "inv.yml", fleet, [0, 1])
    tasks_yaml = ""
    for name, body in (("copy new", 'copy: {content: "new\\n", dest: "~/fault-ro/new"}'),
                       ("copy over", 'copy: {content: "new\\n", dest: "~/fault-ro/existing", mode: "0600"}'),
                       ("file touch", 'file: {path: "~/fault-ro/t", state: touch}'),
                       ("file directory", 'file: {path: "~/fault-ro/d2", state: directory}'),
                       ("file mode", 'file: {path: "~/fault-ro/d", state: directory, mode: "0700"}'),
                       ("file absent", 'file: {path: "~/fault-ro/existing", state: absent}')):
        tasks_yaml += f"    - name: {name}\n      {body}\n      ignore_errors: true\n"
    pb = write(work / "pb.yml", "- hosts: fleet\n  gather_facts: false\n  tasks:\n" + tasks_yaml)
    proc = fleetops("run", pb, "-i", inv, "--json", "--results", work / "runs", cwd=work)
    assert proc.returncode == 0, proc.stderr      # every failure was ignored on purpose
    tasks = by_task(json.loads(proc.stdout))
    for name, per_host in tasks.items():
        status, res = per_host["lab01"]
        assert status == "ignored" and "Read-only file system" in res["msg"], (name, res["msg"])
        assert per_host["lab02"][0] == "changed", name
    # nothing half-written on the read-only host: same entries, same content, no temp files
    assert sorted(os.listdir(readonly_dir)) == before
    assert (readonly_dir / "existing").read_text() == "old\n"
    assert not (home(fleet, 1) / "fault-ro" / "existing").exists()      # the healthy host did it all


def test_huge_output_is_capped_and_controller_memory_bounded(fleet, work):
    cap = output.MAX_COMMAND_OUTPUT
    inv = write_inventory(work / "inv.yml", fleet, [0, 1])
    pb = write(work / "pb.yml", r"""
- hosts: fleet
  gather_facts: false
  tasks:
    - name: huge
      shell: "head -c 100000000 /dev/zero | tr '\\0' a"
      when: inventory_hostname == 'lab01'
    - name: after
      command: touch fault-after
""")
    proc = start_fleetops("run", pb, "-i", inv, "--results", work / "runs", cwd=work)
    # The controller's own peak: VmHWM of its address space, read until it exits (monotonic, so
    # the last reading is the peak so far). Not wait4's ru_maxrss: Linux carries the forking
    # parent's (this pytest's) high-water mark across exec into it.
    peak_kib = 0
    while proc.poll() is None:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                hwm = [ln for ln in f if ln.startswith("VmHWM:")]
            if hwm:
                peak_kib = max(peak_kib, int(hwm[0].split()[1]))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass
        time.sleep(0.02)
    err = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.returncode == 0, err.decode()
    # controller memory bounded: 100 MB went by, far less was ever held
    assert 0 < peak_kib < 256 * 1024, peak_kib
    tasks = by_task(report_json(work / "runs", cwd=work))
    status, res = tasks["huge"]["lab01"]
    assert status == "changed"
    assert len(res["stdout"]) == cap and set(res["stdout"]) == {"a"}
    assert res["stdout_truncated"] == 100_000_000 - cap
    assert "stdout truncated" in res["msg"]
    assert sorted(tasks["after"]) == ["lab01", "lab02"]
    db = (work / "runs" / "runs.db").stat().st_size + sum(
        p.stat().st_size for p in (work / "runs").glob("runs.db-*"))
    assert db < 16 * cap                  # the store holds the capped output only


def test_binary_and_non_utf8_output_never_reach_the_terminal_raw(fleet, work):
    inv = write_inventory(work / "inv.yml", fleet, [0, 1])
    pb = write(work / "pb.yml", r"""
- hosts: fleet
  gather_facts: false
  tasks:
    - name: binary
      shell: "head -c 65536 /dev/urandom; printf 'caf\\351 \\377\\376 \\033]0;pwned\\007\\033[2J'"
      register: raw
      when: inventory_hostname == 'lab02'
    - name: show
      debug: {msg: "{{ raw.stdout[-22:] }}"}
      when: inventory_hostname == 'lab02'
    - name: crash with it
      python: {payload: selftest_crash, args: {message: "\e]0;pwned\a\e[2J"}}
      when: inventory_hostname == 'lab01'
      ignore_errors: true
    - name: after
      command: touch fault-after
""")
    proc = fleetops("run", pb, "-i", inv, "--results", work / "runs", cwd=work, test_payloads=True)
    assert proc.returncode == 0, proc.stderr
    # nothing the hosts printed reached the terminal as control sequences; it is shown, harmlessly
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\x1b" not in proc.stderr
    assert proc.stdout.count("\\x1b]0;pwned\\x07\\x1b[2J") == 2, proc.stdout
    tasks = by_task(report_json(work / "runs", cwd=work))
    status, res = tasks["binary"]["lab02"]
    assert status == "changed" and "\ufffd" in res["stdout"] and res["stdout"].endswith("\x1b[2J")
    assert sorted(tasks["after"]) == ["lab01", "lab02"]


def test_payload_that_crashes_with_a_traceback(fleet, work):
    inv = write_inventory(work / "inv.yml", fleet, [0, 1])
    pb = write(work / "pb.yml", """
- hosts: fleet
  gather_facts: false
  tasks:
    - name: crash
      python:
        payload: selftest_crash
        args: {lines: 200, message: "deliberate self-test crash"}
      when: inventory_hostname == 'lab01'
    - name: after
      command: touch fault-after
""")
    proc = fleetops("run", pb, "-i", inv, "--results", work / "runs", cwd=work, test_payloads=True)
    assert proc.returncode == 2, proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if "lab01" in ln and "failed" in ln]
    assert line and "payload selftest_crash failed (rc 1): RuntimeError: deliberate self-test crash" in line[0]
    tasks = by_task(report_json(work / "runs", cwd=work))
    status, res = tasks["crash"]["lab01"]
    assert status == "failed"
    tail = res["stderr"]
    assert tail.splitlines()[-1] == "RuntimeError: deliberate self-test crash"
    assert "in _deep" in tail and "selftest noise line 0" not in tail   # the tail, not the noise
    assert list(tasks["after"]) == ["lab02"]
    assert not (home(fleet, 0) / "fault-after").exists()
