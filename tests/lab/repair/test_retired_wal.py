"""The deleted-WAL halt of Hermes 0.22, repaired on the sshd lab with every acknowledged row back.

Field (issue 35, upstream #101064/#109786): a live WAL store's -wal and -shm are deleted under
its holders; Hermes 0.22 halts every write, captures the retired WAL into
state.db.retired-wal-<ts>-<pid>/, and the rows committed since the last checkpoint live only
there and in the holders' open descriptors. Here the holders are the real 0.22 code: its
gateway (`python -m hermes_cli.main gateway run`) and a writer appending messages through its
SessionDB (by its command line a `hermes chat`). The repair play must stop both, merge the rows
the store at the path lacks, swap, restart and verify: every acknowledged message in state.db,
none twice, the store clean.
"""
from __future__ import annotations

import collections
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time

import pytest

from fleetops.remote.hermes import holders as hermes_holders
from tests.corpus import build
from tests.support import hermes_matrix
from tests.support.hermes_procs import wait_for
from tests.support.lab_seed import results_by_task, run_cli
from tests.support.paths import REPO
from tests.lab.repair.test_repair_play import committed, integrity
from tests.lab.repair.test_repair_versions import failures

pytestmark = pytest.mark.lab
VERSION = "0.22.2"


def _wal_store(tmp_path):
    v = hermes_matrix.lab_ready(VERSION)
    src = tmp_path / "src" / "state.db"
    build.standard_db(src, hermes=VERSION)
    c = sqlite3.connect(src)     # a store already in WAL stays WAL under 0.22 (new ones are DELETE on 3.40)
    try:
        assert c.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    finally:
        c.close()
    return src, v


def _main_only_contents(db, tmp_path):
    """The writer's messages the main file holds without any WAL (what a reader sees once it is gone)."""
    copy = tmp_path / "main-only.db"
    shutil.copyfile(db, copy)
    with open(copy, "r+b") as fh:       # no sidecar beside the copy: read it as a rollback-journal file
        fh.seek(18)
        fh.write(b"\x01\x01")
    c = sqlite3.connect(copy)
    try:
        return {r[0] for r in c.execute("SELECT content FROM messages NOT INDEXED WHERE content LIKE 'writer %'")}
    finally:
        c.close()


def refused_writers(h, holders) -> list:
    """PIDs of the user's `hermes chat` writers that hold nothing of the store."""
    out = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        info = hermes_holders.process_info(pid)
        if info and info["uid"] == h["uid"] and (info["cmdline"] or [""])[0].startswith("hermes chat") \
                and pid not in holders:
            out.append(pid)
    return out


def audit(lab, tmp_path, name) -> dict:
    """`fleetops audit --json -l name`: the host's default-profile row."""
    p = subprocess.run([sys.executable, "-m", "fleetops", "audit", "-i", lab.inventory_path, "--json", "-l", name,
                        "--results", str(tmp_path / "runs")], capture_output=True, text=True, cwd=str(REPO), timeout=900)
    assert p.stdout.strip(), p.stderr[-3000:]
    return next(r for r in json.loads(p.stdout)["databases"] if r["host"] == name and r["profile"] == "default")


def test_halted_host_repaired_with_rows_only_in_the_retired_wal(lab, seeder, tmp_path):
    """Audit -> repair -> audit on a halted host, while another lab user's real 0.22 gateway runs on
    the same machine (a shared host: that process is proven unable to hold the store, not refused)."""
    src, v = _wal_store(tmp_path)
    name, neighbour = lab.hosts[0]["name"], lab.hosts[1]["name"]
    seeder.seed_image(neighbour, src)
    other_gw = seeder.gateway(neighbour, venv=v.lab_venv)
    h = seeder.seed_image(name, src)
    gw = seeder.gateway(name, venv=v.lab_venv)
    log = seeder.writer(name, interval=0.05, venv=v.lab_venv)
    wait_for(lambda: len(committed(log)) >= 60, 120, "60 committed messages")
    for s in ("-wal", "-shm"):          # the operator's mistake: the sidecars go under live holders
        os.unlink(h["db"] + s)
    wait_for(lambda: "DeletedWalGenerationError" in open(log).read(), 60, "the writer's halt")
    wait_for(lambda: [d for d in os.listdir(h["profile_home"]) if ".retired-wal-" in d and not d.endswith(".partial")],
          60, "Hermes' capture of the retired WAL")
    # a Hermes process started after the halt: refused the store at open, it holds no handle and retries
    seeder.writer(name, interval=0.5, require_commit=False, venv=v.lab_venv)
    first = {x["pid"] for x in seeder.holders(name)}
    wait_for(lambda: refused_writers(h, first), 60, "the refused writer")
    refused = refused_writers(h, first)
    time.sleep(1.0)
    acked = committed(log)
    only_wal = set(acked) - _main_only_contents(h["db"], tmp_path)
    assert only_wal, "every acknowledged row reached the main file: the case is not the field's"
    holders = {x["pid"]: x for x in seeder.holders(name)}
    assert gw in holders and any(x["retired"] for x in holders.values()), holders
    before = audit(lab, tmp_path, name)
    assert before["verdict"] == "retired_wal", (before["verdict"], before["reasons"])
    assert str(gw) in before["holders"] and "retired" in before["holders"], before["holders"]

    rc, doc = run_cli(lab, tmp_path / "runs", "-l", name)
    by = results_by_task(doc)
    assert rc == 0, failures(doc)
    pre = by["preflight: refuse holders that are not Hermes, before anything is done"][name][1]["results"][0]
    assert pre["proven_unable"]["count"] >= 1 and seeder.host(neighbour)["user"] in pre["proven_unable"]["users"], pre
    assert other_gw in {x["pid"] for x in seeder.holders(neighbour)}      # the neighbour's Hermes untouched
    st, res = by["outcome: REPAIRED"][name]
    assert st == "changed" and "retired_wal_merge" in res["msg"], res["msg"]
    rep = by["repair on a copy, verify the new file"][name][1]["results"][0]
    rw = rep["retired_wal"]
    assert rw["merged_total"] >= len(only_wal) and rw["merged_by_table"].get("messages", 0) >= len(only_wal), rw
    assert all(not s.get("error") for s in rw["sources"]), rw["sources"]
    assert "row(s) back from" in res["msg"]

    db = h["db"]
    assert integrity(db) == ["ok"]
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        contents = [r[0] for r in c.execute("SELECT content FROM messages NOT INDEXED WHERE content LIKE 'writer %'")]
        fts = c.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'snapshots'").fetchone()[0]
    finally:
        c.close()
    missing = set(acked) - set(contents)
    assert not missing, (len(missing), sorted(missing)[:5])
    twice = [t for t, n in collections.Counter(contents).items() if n > 1]
    assert not twice, twice[:5]
    assert fts >= len(acked)
    vres = by["verify (write probe, quick_check, counts, FTS, hermes sessions stats)"][name][1]["results"][0]
    assert not vres["failed"], vres["msg"]
    assert vres["checks"]["duplicates"]["groups"] == 0 and "no message stored twice" in vres["msg"]
    assert not [x for x in seeder.holders(name) if x["retired"]]
    assert not [p for p in refused if hermes_holders.alive(p)], "the refused writer still runs"
    after = audit(lab, tmp_path, name)
    assert after["verdict"] == "healthy", (after["verdict"], after["reasons"])
