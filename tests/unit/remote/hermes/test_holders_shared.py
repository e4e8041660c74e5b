"""Shared hosts: another user's process whose fd table cannot be read is proven unable to hold a
0600 store by its /proc/PID/status (Uid, CapEff), whatever owns its /proc entry.

A fake process table (a unit test may fake one): each process has the status and cmdline files
the kernel gives anyone, and an fd entry that cannot be listed. /proc/PID itself stays owned by
root here, as the kernel shows a non-dumpable process (one that changed its credentials), so
its owner by stat says nothing.
"""
from __future__ import annotations

import os

import pytest

from fleetops.remote.hermes import holders as hermes_holders

OWNER = 4321
OTHER = 1234
GATEWAY = ["/opt/hermes/bin/python", "-m", "hermes_cli.main", "gateway", "run"]


def status(uids, cap_eff):
    return ("Name:\thermes\nState:\tS (sleeping)\nUid:\t%s\nGid:\t%d\t%d\t%d\t%d\nCapEff:\t%016x\n" % (
        "\t".join(str(u) for u in uids), OTHER, OTHER, OTHER, OTHER, cap_eff))


def fake_proc(tmp_path, procs):
    """procs: {pid: (uids, CapEff, argv)}; every fd table is unreadable (not a directory)."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text("")
    for pid, (uids, caps, argv) in procs.items():
        d = proc / str(pid)
        d.mkdir()
        (d / "status").write_text(status(uids, caps))
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        (d / "stat").write_text("%d (hermes) S 1 %d %d 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0" % (pid, pid, pid))
        (d / "fd").write_text("")          # listdir fails: the fds of another user's process
        (d / "environ").write_text("")
    return str(proc)


@pytest.fixture
def store(tmp_path):
    home = tmp_path / "home" / ".hermes"
    home.mkdir(parents=True, mode=0o700)
    db = home / "state.db"
    for s in ("", "-wal", "-shm"):
        p = str(db) + s
        with open(p, "wb"):
            pass
        os.chmod(p, 0o600)
        os.chown(p, OWNER, OWNER)
    os.chown(home, OWNER, OWNER)
    return str(db)


@pytest.mark.parametrize("policy", ["strict", "owner"])
def test_other_users_hermes_without_dac_caps_is_proven_unable(tmp_path, store, policy):
    proc = fake_proc(tmp_path, {7001: ([OTHER] * 4, 0, GATEWAY),
                                7002: ([OTHER] * 4, 1 << 5, ["python3", "worker.py"])})  # CAP_KILL: no DAC
    res = hermes_holders.scan_policy(store, policy, proc=proc)
    assert res["status"] == "known", res["reason"]
    assert res["unable"]["count"] == 2 and res["uninspectable"]["count"] == 0
    assert "CAP_DAC_OVERRIDE" in res["unable"]["why"]


@pytest.mark.parametrize("uids,caps,why", [
    ([0, 0, 0, 0], 0, "root"),
    ([OTHER, OTHER, 0, OTHER], 0, "saved uid root: it can become root again"),
    ([OTHER, OTHER, OTHER, OWNER], 0, "its filesystem uid is the owner's"),
    ([OTHER] * 4, 1 << 1, "CAP_DAC_OVERRIDE"),
    ([OTHER] * 4, 1 << 2, "CAP_DAC_READ_SEARCH"),
])
def test_a_process_that_could_open_it_still_refuses(tmp_path, store, uids, caps, why):
    proc = fake_proc(tmp_path, {7001: (uids, caps, GATEWAY)})
    res = hermes_holders.scan_policy(store, "strict", proc=proc)
    assert res["status"] == "unknown" and res["uninspectable"]["count"] == 1, why
    assert res["unable"]["count"] == 0


def test_root_owned_hermes_refuses_under_policy_owner(tmp_path, store):
    proc = fake_proc(tmp_path, {7001: ([0] * 4, (1 << 41) - 1, GATEWAY)})
    res = hermes_holders.scan_policy(store, "owner", proc=proc)
    assert res["status"] == "unknown" and "could hold it" in res["reason"], res["reason"]


@pytest.mark.parametrize("path,mode", [("", 0o640), ("-wal", 0o604), ("-shm", 0o660), ("dir", 0o777)])
def test_no_proof_when_the_modes_let_others_in(tmp_path, store, path, mode):
    """A group/other bit on the store or a sidecar (an ACL's mask is those bits), or a directory
    others may write (they could put their own file there): the proof does not hold."""
    os.chmod(os.path.dirname(store) if path == "dir" else store + path, mode)
    proc = fake_proc(tmp_path, {7001: ([OTHER] * 4, 0, GATEWAY)})
    res = hermes_holders.scan_policy(store, "strict", proc=proc)
    assert res["status"] == "unknown" and res["unable"]["count"] == 0


def test_unreadable_status_proves_nothing(tmp_path, store):
    proc = fake_proc(tmp_path, {7001: ([OTHER] * 4, 0, GATEWAY)})
    os.unlink(os.path.join(proc, "7001", "status"))
    assert hermes_holders.cannot_open(7001, OWNER, proc) is False
    assert hermes_holders.scan_policy(store, "strict", proc=proc)["status"] == "unknown"
