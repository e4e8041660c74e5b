"""Faults in the Hermes repair, on real lab hosts with real Hermes stores (issue 8).

- state.db owned by another user, or mode 000: the audit says "permission denied" with owner
  and mode; the repair refuses before any writer is stopped and changes nothing.
- the SSH connection dropped while a payload writes (the snapshot; the salvage): the original
  is untouched, the orphaned payload stops writing at once (it cannot interleave with the next
  run), and the next run sets the half-written output aside and finishes the repair.

Connections are dropped for real: the host's per-connection sshd processes are SIGKILLed, or
the controller is; every wait is a poll with a generous limit, never a sleep that decides.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from fleetops.remote.hermes import holders as hermes_holders
from tests.corpus import damage
from tests.support.cli_run import (ROOT, by_task, fleetops, process_tree, report_json, start_fleetops, wait_for,
                                   write_inventory)
from tests.support.seed import Seeder, find_venv

pytestmark = pytest.mark.lab

REPAIR = str(ROOT / "playbooks" / "repair.yml")
FAST = ["-e", "stop_quiet_window=3", "-e", "stop_grace=3"]
SIDECARS = ("", "-wal", "-shm")




@pytest.fixture
def seeder(lab, tmp_path):
    venv = find_venv()
    if venv is None:
        pytest.skip("no hermes-agent venv the lab users can run: PYTHON=/usr/bin/python3 "
                    "FLEETOPS_HERMES_VENV=/opt/fleetops-test/hermes-venv-shared sh scripts/hermes-venv.sh")
    s = Seeder(lab, tmp_path / "seed-registry.json", venv=venv)
    for h in lab.hosts:
        s.wipe(h["name"])
    yield s
    s.stop_all()


def sha(p) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def image_state(db) -> dict:
    """Owner, mode, inode, size and sha256 of state.db and each sidecar that exists."""
    out = {}
    for s in SIDECARS:
        if os.path.exists(db + s):
            st = os.stat(db + s)
            out[s or "db"] = (st.st_uid, st.st_gid, oct(st.st_mode), st.st_ino, st.st_size, sha(db + s))
    return out


def data_state(db) -> dict:
    """image_state without the -shm's bytes: the shared-memory WAL index holds no row, and any
    reader of a WAL image may rewrite it (SQLite rebuilds it); that the file is there, with its
    owner, mode and inode, still counts."""
    out = image_state(db)
    if "-shm" in out:
        out["-shm"] = out["-shm"][:5]
    return out


def rowids(db, table) -> set:
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in c.execute(f'SELECT rowid FROM "{table}" NOT INDEXED')}
    finally:
        c.close()


def integrity(db) -> list:
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in c.execute("PRAGMA integrity_check(100)")]
    finally:
        c.close()


def payload_pids(uid) -> list:
    """Live fleetops payloads of a lab user: `python3 ... -c BOOTSTRAP` (Hermes' own processes in
    these tests run scripts or `hermes`, never `-c`)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.stat(f"/proc/{d}").st_uid != uid:
                continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{d}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        argv = cmd.split(b"\0")
        if os.path.basename(argv[0]).startswith(b"python") and b"-c" in argv and state != b"Z":
            out.append(int(d))
    return out


def connection_sshds(lab, i) -> list:
    """The per-connection sshd processes of lab host i (not its listener)."""
    listener = int(lab.hosts[i]["pid"])
    out = []
    for p in process_tree(listener):
        try:
            with open(f"/proc/{p}/comm") as f:
                if p != listener and f.read().strip() == "sshd":
                    out.append(p)
        except OSError:
            continue
    return out


def drop(pids) -> None:
    """SIGKILL those sshd processes: the connection drops; the commands it ran (the payload) are
    left running, reparented, as on a real host whose network went away."""
    for p in pids:
        os.kill(p, signal.SIGKILL)


def incomplete(pattern, marker) -> list:
    """Output directories matching `pattern` that lack their completion `marker` file."""
    return [d for d in glob.glob(pattern) if os.path.isdir(d) and not os.path.exists(os.path.join(d, marker))]


def item(tasks, name, host) -> dict:
    """The first loop item's result of a task on a host (the default profile)."""
    return tasks[name][host][1]["results"][0]


# ---- state.db owned by another user, or mode 000 -----------------------------------------------

def test_state_db_not_readable_audit_says_why_and_repair_refuses_before_stopping(lab, seeder, std_src, tmp_path):
    root_owned, mode_000, fine = (seeder.host(f"lab0{i}") for i in (1, 2, 3))
    for h in (root_owned, mode_000, fine):
        seeder.seed_image(h["name"], std_src)
    # a gateway holds lab01's store, then the file is taken from its user (as a `sudo hermes ...` does)
    gw = seeder.gateway("lab01")
    os.chown(root_owned["db"], 0, 0)
    os.chmod(root_owned["db"], 0o600)
    os.chmod(mode_000["db"], 0)
    before = {h["name"]: image_state(h["db"]) for h in (root_owned, mode_000, fine)}
    inv = write_inventory(tmp_path / "inv.yml", lab, [0, 1, 2])

    # --- audit: "unreadable", permission denied with owner and mode; the healthy host audited normally
    a = fleetops("audit", "-i", inv, "--json", "--results", tmp_path / "runs", cwd=tmp_path)
    assert a.returncode == 5, a.stderr
    assert "Traceback" not in a.stdout + a.stderr
    dbs = {d["host"]: d for d in json.loads(a.stdout)["databases"]}
    assert (dbs["lab01"]["verdict"], dbs["lab01"]["reasons"]) == ("unreadable", [
        f"permission denied: {root_owned['db']} not readable by {root_owned['user']}: owned by root (uid 0), mode 0600"])
    assert (dbs["lab02"]["verdict"], dbs["lab02"]["reasons"]) == ("unreadable", [
        f"permission denied: {mode_000['db']} not readable by {mode_000['user']}: owned by {mode_000['user']} "
        f"(uid {mode_000['uid']}), mode 0000"])
    assert dbs["lab03"]["verdict"] == "healthy"
    text = fleetops("report", "latest", "--audit", "--results", tmp_path / "runs", cwd=tmp_path)
    assert "permission denied" in text.stdout and "mode 0600" in text.stdout and "Traceback" not in text.stdout

    # --- repair: the canary (lab01) refused at its first acting step, before any writer is stopped;
    # the play stops there (max_fail_percentage 0), so lab02 and lab03 are never touched
    r = fleetops("run", REPAIR, "-i", inv, "--json", "--results", tmp_path / "runs", *FAST, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    doc = json.loads(r.stdout)
    tasks = by_task(doc)
    assert doc["plays"][0]["batches"] == [["lab01"]]
    assert "max_fail_percentage" in doc["plays"][0]["stopped_reason"]
    msg = tasks["outcome: REFUSED or FAILED"]["lab01"][1]["msg"]
    assert msg.startswith("REFUSED at 'snapshot while Hermes still runs"), msg
    assert (f"permission denied: {root_owned['db']} not readable by {root_owned['user']}: owned by root (uid 0), "
            f"mode 0600 -- fix its ownership/permissions, then re-run; nothing was stopped or changed") in msg, msg
    assert "\n" not in msg and "Traceback" not in msg
    assert "lab01" not in tasks.get("stop every writer", {})          # no stop step ran
    assert "lab01" not in tasks.get("quarantine the three-file image", {})
    assert hermes_holders.alive(gw) and {x["pid"] for x in seeder.holders("lab01", "gateway")} == {gw}
    assert {h for t in doc["plays"][0]["tasks"] for h in t["results"]} == {"lab01"}
    # nothing written or moved: the image exactly as before, no snapshot, quarantine or work dir
    assert sorted(os.listdir(Path(root_owned["hermes"]) / "fleetops")) == ["lock"]   # the lease file only

    # --- the mode-000 host as the canary of its own run: the same refusal; lab03 untouched
    r2 = fleetops("run", REPAIR, "-i", inv, "-l", "lab02,lab03", "--json", "--results", tmp_path / "runs", *FAST,
                  cwd=tmp_path)
    assert r2.returncode == 2, r2.stderr
    doc2 = json.loads(r2.stdout)
    msg2 = by_task(doc2)["outcome: REFUSED or FAILED"]["lab02"][1]["msg"]
    assert msg2.startswith("REFUSED at 'snapshot while Hermes still runs"), msg2
    assert (f"permission denied: {mode_000['db']} not readable by {mode_000['user']}: owned by {mode_000['user']} "
            f"(uid {mode_000['uid']}), mode 0000 -- fix its ownership") in msg2, msg2
    assert {h for t in doc2["plays"][0]["tasks"] for h in t["results"]} == {"lab02"}
    assert sorted(os.listdir(Path(mode_000["hermes"]) / "fleetops")) == ["lock"]
    assert not (Path(fine["hermes"]) / "fleetops").exists()

    after = {h["name"]: image_state(h["db"]) for h in (root_owned, mode_000, fine)}
    assert after == before
    assert hermes_holders.alive(gw)


# ---- the connection dropped while a payload writes ---------------------------------------------

def test_connection_dropped_during_snapshot(lab, seeder, std_src, tmp_path):
    """sshd's connection processes killed while the snapshot is being written (lab01, the canary)."""
    h, other = seeder.host("lab01"), seeder.host("lab02")
    # FTS damage: the snapshot's quick_check reads the whole copy, so it is being written a while
    d = damage.make("fts_pages_overwritten", std_src, tmp_path / "lab01" / "state.db")
    seeder.seed_image("lab01", d.path)
    seeder.seed_image("lab02", std_src)
    before, before_other = image_state(h["db"]), image_state(other["db"])
    inv = write_inventory(tmp_path / "inv.yml", lab, [0, 1])
    snaps = os.path.join(h["hermes"], "fleetops", "snapshots", "*")
    runs = tmp_path / "runs"

    proc = start_fleetops("run", REPAIR, "-i", inv, "--json", "--results", runs, *FAST, cwd=tmp_path)
    try:
        # the run's one connection to lab01 exists from its first task: find its sshd processes
        # first, so the kill follows the snapshot's first bytes within milliseconds
        wait_for(lambda: os.path.exists(os.path.join(h["hermes"], "fleetops", "lock")), "the lease on lab01",
                 limit=300, proc=proc)
        sshds = connection_sshds(lab, 0)
        assert sshds
        deadline = time.monotonic() + 300
        while True:
            started = [s for s in incomplete(snaps, "manifest.json") if os.path.exists(s + "/state.db")]
            if started:
                break
            assert proc.poll() is None and time.monotonic() < deadline, "the snapshot never started on lab01"
            time.sleep(0.002)
        drop(sshds)
        cut = started[0]
        assert not os.path.exists(os.path.join(cut, "manifest.json"))   # cut off mid-write
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 3, err.decode()[-2000:]
    doc = json.loads(out)
    tasks = by_task(doc)
    status, res = tasks["snapshot while Hermes still runs (refused if free space is short)"]["lab01"]
    assert status == "unreachable" and "connection lost" in res["msg"], res["msg"]
    assert doc["plays"][0]["batches"] == [["lab01"]]      # the rolling play stops after a bad canary
    assert not (Path(other["hermes"]) / "fleetops").exists() and image_state(other["db"]) == before_other

    # the orphaned payload stops with its connection: it never finishes the snapshot it was writing
    wait_for(lambda: not payload_pids(h["uid"]), "the orphaned payload to end", limit=300)
    assert not os.path.exists(os.path.join(cut, "manifest.json"))
    # the original is untouched, and nothing appeared beside it: an idle image is read without
    # locks, so SQLite creates no -wal/-shm even when the read is cut off
    assert data_state(h["db"]) == {k: v[:5] if k == "-shm" else v for k, v in before.items()}

    # the next run sets the half-written snapshot aside (kept, never used) and repairs
    r = fleetops("run", REPAIR, "-i", inv, "--json", "--results", runs, *FAST, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    tasks = by_task(json.loads(r.stdout))
    snap = item(tasks, "snapshot while Hermes still runs (refused if free space is short)", "lab01")
    assert snap["leftovers"] == [f"set aside {cut} as {os.path.basename(cut)}.incomplete (no manifest.json: "
                                 f"an earlier run was cut off there; never used)"], snap
    assert snap["snapshot_dir"] != cut and snap["manifest"]["files"]["state.db"]["size"] > 0
    assert os.path.exists(cut + ".incomplete/state.db") and not os.path.exists(cut)
    assert tasks["outcome: REPAIRED"]["lab01"][0] == "changed"
    assert tasks["outcome: untouched (healthy: nothing stopped, nothing restarted)"]["lab02"][0] == "ok"
    assert integrity(h["db"]) == ["ok"]
    for table, ids in d.expected_rows.items():
        assert rowids(h["db"], table) == ids, table


def test_controller_killed_during_salvage(lab, seeder, std_src, tmp_path):
    """The controller SIGKILLed while the salvage writes the new database, writers already stopped."""
    h = seeder.host("lab01")
    d = damage.make("garbage_leaf_pages", std_src, tmp_path / "lab01" / "state.db")
    seeder.seed_image("lab01", d.path)
    gw = seeder.gateway("lab01")
    inv = write_inventory(tmp_path / "inv.yml", lab, [0])
    work = os.path.join(h["hermes"], "fleetops", "work")
    runs = tmp_path / "runs"

    proc = start_fleetops("run", REPAIR, "-i", inv, "--json", "--results", runs, *FAST, cwd=tmp_path)
    try:
        tmp_out = wait_for(lambda: glob.glob(os.path.join(work, "*", "new", "state.db.salvage-tmp")),
                           "the salvage to start writing on lab01", limit=300, proc=proc)[0]
        assert payload_pids(h["uid"])                   # the salvage payload, running
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    killed = report_json(runs, cwd=tmp_path)
    assert (killed["status"], killed["status_note"]) == ("interrupted", "no end recorded")

    # the orphaned salvage stops with its connection: no new database, no report, ever
    wait_for(lambda: not payload_pids(h["uid"]), "the orphaned payload to end", limit=300)
    cut = os.path.dirname(os.path.dirname(tmp_out))
    assert os.path.exists(tmp_out)
    assert not os.path.exists(os.path.join(cut, "new", "state.db"))
    assert not os.path.exists(os.path.join(cut, "repair-report.json"))
    # the original is in place, byte for byte the image quarantined once the gateway had stopped
    assert not hermes_holders.alive(gw)
    qdir = json.loads((Path(h["hermes"]) / "fleetops" / "state" / "default-quarantine.json").read_text())["quarantine_dir"]
    man = json.loads((Path(qdir) / "manifest.json").read_text())
    assert set(man["files"]) == {"state.db" + s for s in SIDECARS if os.path.exists(h["db"] + s)}
    for name, f in man["files"].items():
        assert sha(os.path.join(h["hermes"], name)) == f["sha256"] == sha(os.path.join(qdir, "copy", name)), name

    # the next run: takes over the dead run's lease, sets the cut-off work dir aside, repairs,
    # and restarts the gateway the killed run had stopped
    r = fleetops("run", REPAIR, "-i", inv, "--json", "--results", runs, *FAST, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    tasks = by_task(json.loads(r.stdout))
    assert tasks["take the host lease for this run"]["lab01"][1].get("took_over") == killed["run_id"]
    rep = item(tasks, "repair on a copy, verify the new file", "lab01")
    assert rep["leftovers"] == [f"set aside {cut} as {os.path.basename(cut)}.incomplete (no repair-report.json: "
                                f"an earlier run was cut off there; never used)"], rep
    assert rep["new_db"] != os.path.join(cut, "new", "state.db")
    assert os.path.exists(os.path.join(cut + ".incomplete", "new", "state.db.salvage-tmp"))
    assert tasks["outcome: REPAIRED"]["lab01"][0] == "changed"
    assert integrity(h["db"]) == ["ok"]
    for table in ("sessions", "messages"):
        assert rowids(h["db"], table) == d.expected_rows[table], table
    assert {x["pid"] for x in seeder.holders("lab01", "gateway")} - {gw}
