"""hermes_snapshot: a consistent backup-API copy under a live Hermes writer; refusal when space is short."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from fleetops.remote.hermes import snapshot as hermes_snapshot

from tests.support.hermes_procs import args_for, holders, start_writer


def sha(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def _count(db, sql):
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return c.execute(sql).fetchone()[0]
    finally:
        c.close()


def test_snapshot_under_a_live_writer_is_consistent(home, procs):
    db = home / "state.db"
    w = start_writer(procs, db)
    assert [h for h in holders(db) if h["pid"] == w.pid]  # the writer really holds the file
    before = _count(db, "SELECT count(*) FROM messages NOT INDEXED")
    r = hermes_snapshot.main(args_for(home))
    assert not r["failed"], r["msg"]
    after = _count(db, "SELECT count(*) FROM messages NOT INDEXED")
    assert w.poll() is None  # the writer kept running through the snapshot
    d = Path(r["snapshot_dir"])
    assert d.parent == home / "fleetops" / "snapshots"
    snap = d / "state.db"
    man = json.loads((d / "manifest.json").read_text())
    assert man == r["manifest"]
    assert man["files"]["state.db"]["sha256"] == sha(snap)
    assert man["files"]["state.db"]["size"] == snap.stat().st_size
    assert man["quick_check"] == {"ok": True, "errors": 0, "first": []} and man["verified"]
    assert man["page_count"] * man["page_size"] == snap.stat().st_size
    # one self-contained file, private
    assert not os.path.exists(str(snap) + "-wal") and not os.path.exists(str(snap) + "-shm")
    assert stat.S_IMODE(snap.stat().st_mode) == 0o600
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / "manifest.json").stat().st_mode) == 0o600
    # consistent: the writer's rows (many only in the WAL) are there up to one transaction
    n = _count(snap, "SELECT count(*) FROM messages NOT INDEXED")
    assert before <= n <= after
    assert _count(snap, "SELECT count(*) FROM messages WHERE session_id LIKE 'fleetops_writer_%'") > 0
    c = sqlite3.connect(str(snap))
    c.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES('integrity-check', 1)")
    assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert c.execute("SELECT count(*) FROM messages_fts").fetchone()[0] == n  # index and table agree
    c.close()


def test_snapshot_of_an_idle_wal_image_keeps_the_wal_rows(tmp_path, wal_image):
    from tests.corpus import build
    root = tmp_path / "h"
    build.copy_image(wal_image, root / "state.db")
    r = hermes_snapshot.main(args_for(root))
    assert not r["failed"], r["msg"]
    snap = Path(r["snapshot_dir"]) / "state.db"
    # every row of the image, the WAL-only conversation included
    src_copy = tmp_path / "y" / "state.db"
    build.copy_image(wal_image, src_copy)
    assert _count(snap, "SELECT count(*) FROM messages") == _count(src_copy, "SELECT count(*) FROM messages")
    main_only = tmp_path / "z" / "state.db"
    main_only.parent.mkdir()
    main_only.write_bytes(Path(wal_image).read_bytes())  # the main file alone: what `cp state.db` gets
    assert _count(snap, "SELECT count(*) FROM messages") > _count(main_only, "SELECT count(*) FROM messages")


def test_free_space_refusal_before_anything(home):
    r = hermes_snapshot.main(args_for(home, min_free_factor=1e9))
    assert r["failed"] and r["refused"] and r["reason"] == "free_space"
    assert "not enough free space" in r["msg"] and "nothing was stopped" in r["msg"]
    assert r["free_bytes"] < r["needed_bytes"]
    assert not (home / "fleetops").exists()


@pytest.fixture
def small_fs(tmp_path):
    """A real 2 MB tmpfs (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount tmpfs here: %s" % r.stderr.strip())
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_free_space_refusal_on_a_small_filesystem(small_fs):
    root = small_fs / "hermes"
    root.mkdir()
    db = root / "state.db"
    c = sqlite3.connect(str(db))
    c.execute("CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT)")
    c.executemany("INSERT INTO state_meta VALUES (?, ?)", [("k%d" % i, "x" * 900) for i in range(700)])
    c.commit()
    c.close()
    size = db.stat().st_size
    assert 500000 < size < 1500000
    r = hermes_snapshot.main(args_for(root))
    assert r["failed"] and r["refused"] and r["reason"] == "free_space", r["msg"]
    assert str(root) in r["msg"]
    assert not (root / "fleetops").exists()
    assert sorted(os.listdir(root)) == ["state.db"]


def test_check_mode_writes_nothing(home):
    r = hermes_snapshot.main(args_for(home, _check=True))
    assert not r["failed"] and not r["changed"] and "would snapshot" in r["msg"]
    assert not (home / "fleetops").exists()


def test_missing_database_fails(tmp_path):
    r = hermes_snapshot.main(args_for(tmp_path))
    assert r["failed"] and "no state.db" in r["msg"]


def test_active_profile_is_never_followed(home, tmp_path):
    other = home / "profiles" / "work"
    other.mkdir(parents=True)
    (home / "active_profile").write_text("work\n")
    r = hermes_snapshot.main(args_for(home))
    assert not r["failed"] and r["manifest"]["source"]["db"] == str(home / "state.db")
    r = hermes_snapshot.main(args_for(home, profile="work"))
    assert r["failed"] and str(other / "state.db") in r["msg"]


def _stopped(root):
    """Hermes stopped cleanly: the WAL checkpointed and both sidecars gone, as after `gateway stop`."""
    c = sqlite3.connect(str(root / "state.db"))
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    c.close()
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("state.db")) == ["state.db"]


def test_snapshot_of_a_stopped_store_leaves_no_sidecars_beside_it(home):
    """A WAL-mode state.db with no -wal/-shm is read without locks: SQLite creates nothing beside it
    (a plain read-only open would leave an empty -wal and a -shm behind, even after closing)."""
    _stopped(home)
    before = sha(home / "state.db")
    r = hermes_snapshot.main(args_for(home))
    assert not r["failed"], r["msg"]
    assert sorted(p.name for p in home.iterdir() if p.name.startswith("state.db")) == ["state.db"]
    assert sha(home / "state.db") == before
    assert r["manifest"]["source"]["open_mode"] == "immutable"
    snap = Path(r["snapshot_dir"]) / "state.db"
    q = "SELECT count(*) FROM messages NOT INDEXED"
    assert _count(snap, q) == _count(home / "state.db", q) > 0


def test_lock_free_read_is_redone_when_a_writer_appears(home, monkeypatch):
    """A writer opening the store during the lock-free read is seen (a -wal appears, the main file
    changes): the snapshot is read again with locks and holds the writer's committed row."""
    _stopped(home)
    real = hermes_snapshot._copy
    writer = []

    def copy_then_write(db, out, immutable):
        res = real(db, out, immutable)
        if immutable and not writer:
            c = sqlite3.connect(db)
            c.execute("INSERT INTO state_meta(key, value) VALUES ('fleetops_test_late_write', 'x')")
            c.commit()
            writer.append(c)  # stays open: its row is in the WAL only
        return res

    monkeypatch.setattr(hermes_snapshot, "_copy", copy_then_write)
    try:
        r = hermes_snapshot.main(args_for(home))
    finally:
        for c in writer:
            c.close()
    assert not r["failed"], r["msg"]
    assert r["manifest"]["source"]["open_mode"].startswith("ro (the lock-free read was redone")
    snap = Path(r["snapshot_dir"]) / "state.db"
    assert _count(snap, "SELECT count(*) FROM state_meta WHERE key = 'fleetops_test_late_write'") == 1
