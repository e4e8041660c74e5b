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
import os
import shutil
import sqlite3
import time

import pytest

from tests.corpus import build
from tests.support import hermes_matrix
from tests.support.hermes_procs import wait_for
from tests.support.lab_seed import results_by_task, run_cli
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


def test_halted_host_repaired_with_rows_only_in_the_retired_wal(lab, seeder, tmp_path):
    src, v = _wal_store(tmp_path)
    name = lab.hosts[0]["name"]
    h = seeder.seed_image(name, src)
    gw = seeder.gateway(name, venv=v.lab_venv)
    log = seeder.writer(name, interval=0.05, venv=v.lab_venv)
    wait_for(lambda: len(committed(log)) >= 60, 120, "60 committed messages")
    for s in ("-wal", "-shm"):          # the operator's mistake: the sidecars go under live holders
        os.unlink(h["db"] + s)
    wait_for(lambda: "DeletedWalGenerationError" in open(log).read(), 60, "the writer's halt")
    wait_for(lambda: [d for d in os.listdir(h["profile_home"]) if ".retired-wal-" in d and not d.endswith(".partial")],
          60, "Hermes' capture of the retired WAL")
    time.sleep(1.0)
    acked = committed(log)
    only_wal = set(acked) - _main_only_contents(h["db"], tmp_path)
    assert only_wal, "every acknowledged row reached the main file: the case is not the field's"
    holders = {x["pid"]: x for x in seeder.holders(name)}
    assert gw in holders and any(x["retired"] for x in holders.values()), holders

    rc, doc = run_cli(lab, tmp_path / "runs", "-l", name)
    by = results_by_task(doc)
    assert rc == 0, failures(doc)
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
    assert not [x for x in seeder.holders(name) if x["retired"]]
