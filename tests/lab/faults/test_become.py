"""become through real sudo on a lab host: fleetops logs in as the lab user and becomes a
separate Hermes user (a NOPASSWD rule in /etc/sudoers.d, Debian's sudo with its default
use_pty), set per host in the inventory (ansible_become / ansible_become_user) as operators
whose login user is not the Hermes user write it. Commands, files, the audit and the repair
all act as the Hermes user; a connection dropped mid-snapshot still stops the payload."""
from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from tests.corpus import build, damage
from tests.support.cli_run import by_task, fleetops, start_fleetops, wait_for, write, write_inventory
from tests.lab.faults.test_repair import (FAST, REPAIR, connection_sshds, drop, image_state, incomplete, item,
                                            payload_pids)

pytestmark = pytest.mark.lab




@pytest.fixture
def hermes_user(lab):
    """A Unix user of its own for Hermes, which lab host 0's login user may become (NOPASSWD)."""
    if not shutil.which("sudo") or not shutil.which("visudo") or not shutil.which("useradd"):
        pytest.skip("needs sudo, visudo and useradd")
    name = f"{lab.prefix}hm"
    if subprocess.run(["id", name], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True)
    pw = pwd.getpwnam(name)
    rule = f"/etc/sudoers.d/fleetops-test-{lab.prefix}"
    with open(rule, "w") as f:
        f.write(f"{lab.hosts[0]['user']} ALL=({name}) NOPASSWD: ALL\n")
    os.chmod(rule, 0o440)
    subprocess.run(["visudo", "-cf", rule], check=True, capture_output=True)
    shutil.rmtree(os.path.join(pw.pw_dir, ".hermes"), ignore_errors=True)
    try:
        yield pw
    finally:
        os.unlink(rule)
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
        time.sleep(0.2)
        subprocess.run(["userdel", "-r", name], capture_output=True)


def seed(pw, src):
    d = Path(pw.pw_dir) / ".hermes"
    d.mkdir(mode=0o700, exist_ok=True)
    build.copy_image(Path(src), d / "state.db")
    for p in [d] + list(d.iterdir()):
        os.chown(p, pw.pw_uid, pw.pw_gid)
        os.chmod(p, 0o700 if p.is_dir() else 0o600)
    return str(d / "state.db")


def become_inventory(tmp_path, lab, pw):
    return write_inventory(tmp_path / "inv.yml", lab, [0], overrides={
        0: {"ansible_become": True, "ansible_become_user": pw.pw_name}})


def test_inventory_become_runs_commands_files_and_the_audit_as_the_hermes_user(lab, hermes_user, std_src, tmp_path):
    pw = hermes_user
    seed(pw, std_src)
    inv = become_inventory(tmp_path, lab, pw)
    probe = os.path.join(pw.pw_dir, "become-probe.txt")
    book = write(tmp_path / "p.yml", f"""
- hosts: all
  gather_facts: false
  tasks:
    - name: who
      command: id -un
    - name: a file
      copy: {{content: "written as the Hermes user\\n", dest: "{probe}"}}
""")
    r = fleetops("run", book, "-i", inv, "--json", "--results", tmp_path / "runs", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    tasks = by_task(json.loads(r.stdout))
    assert tasks["who"]["lab01"][1]["stdout"].strip() == pw.pw_name
    st = os.stat(probe)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (pw.pw_uid, 0o600)

    a = fleetops("audit", "-i", inv, "--json", "--results", tmp_path / "runs", cwd=tmp_path)
    assert a.returncode == 0, a.stdout[-2000:] + a.stderr[-2000:]
    doc = json.loads(a.stdout)
    [db] = doc["databases"]
    assert db["verdict"] == "healthy" and db["db"] == os.path.join(pw.pw_dir, ".hermes", "state.db")


def test_repair_as_the_hermes_user_and_a_drop_mid_snapshot_stops_the_payload(lab, hermes_user, std_src, tmp_path):
    """The repair under become: the connection dropped while the snapshot is written (the payload
    runs under sudo, as the Hermes user, and still sees its channel go and exits); the next run
    sets the cut-off snapshot aside and repairs; everything it writes is the Hermes user's."""
    pw = hermes_user
    d = damage.make("fts_pages_overwritten", std_src, tmp_path / "img" / "state.db")
    db = seed(pw, d.path)
    before = image_state(db)
    inv = become_inventory(tmp_path, lab, pw)
    hermes = os.path.join(pw.pw_dir, ".hermes")
    snaps = os.path.join(hermes, "fleetops", "snapshots", "*")
    runs = tmp_path / "runs"
    proc = start_fleetops("run", REPAIR, "-i", inv, "--json", "--results", runs, *FAST, cwd=tmp_path)
    try:
        wait_for(lambda: os.path.exists(os.path.join(hermes, "fleetops", "lock")), "the lease", limit=300, proc=proc)
        sshds = connection_sshds(lab, 0)
        assert sshds
        deadline = time.monotonic() + 300
        while True:
            started = [s for s in incomplete(snaps, "manifest.json") if os.path.exists(s + "/state.db")]
            if started:
                break
            assert proc.poll() is None and time.monotonic() < deadline, "the snapshot never started"
            time.sleep(0.002)
        assert payload_pids(pw.pw_uid), "the snapshot payload runs as the Hermes user"
        drop(sshds)
        cut = started[0]
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 3, err.decode()[-2000:]
    status, res = by_task(json.loads(out))["snapshot while Hermes still runs (refused if free space is short)"][
        "lab01"]
    assert status == "unreachable" and "connection lost" in res["msg"], res["msg"]
    wait_for(lambda: not payload_pids(pw.pw_uid), "the orphaned payload under sudo to end", limit=60)
    assert not os.path.exists(os.path.join(cut, "manifest.json"))
    assert image_state(db)["db"] == before["db"]

    r = fleetops("run", REPAIR, "-i", inv, "--json", "--results", runs, *FAST, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    tasks = by_task(json.loads(r.stdout))
    assert tasks["outcome: REPAIRED"]["lab01"][0] == "changed"
    snap = item(tasks, "snapshot while Hermes still runs (refused if free space is short)", "lab01")
    assert snap["leftovers"] and os.path.exists(cut + ".incomplete")
    for root, dirs, files in os.walk(os.path.join(hermes, "fleetops")):
        for n in dirs + files:
            st = os.lstat(os.path.join(root, n))
            assert st.st_uid == pw.pw_uid, os.path.join(root, n)
            assert stat.S_IMODE(st.st_mode) & 0o077 == 0, (os.path.join(root, n), oct(st.st_mode))
    assert os.stat(db).st_uid == pw.pw_uid and stat.S_IMODE(os.stat(db).st_mode) == 0o600
