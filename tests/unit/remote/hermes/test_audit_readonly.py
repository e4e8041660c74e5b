"""The audit is read-only, provably: no byte of the file changes, no checkpoint, no sidecar created."""
from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import tempfile
import subprocess
import time

from fleetops.remote.hermes import audit as hermes_audit
from tests.corpus import build

VENV_PY = "/opt/fleetops-test/hermes-venv/bin/python"
# A Hermes writer through the real SessionDB, appending every half second; autocheckpoint off so
# the main file only changes if someone else (the audit) checkpoints.
WRITER = r"""
import sys, time, traceback
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
db._conn.execute("PRAGMA wal_autocheckpoint=0")
db.create_session("fleetops-writer", "cli", model="m")
errors = open(sys.argv[2], "w")
print("ready", flush=True)
n = 0
while True:
    try:
        db.append_message("fleetops-writer", "user", content="message %d from the writer" % n)
        n += 1
    except Exception:
        errors.write(traceback.format_exc()); errors.flush()
    time.sleep(0.5)
"""


def _sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _listing(d):
    return sorted(os.listdir(d))


def test_audit_under_live_writer_changes_nothing(standard_src, tmp_path):
    db = tmp_path / "state.db"
    build.copy_image(standard_src, db)
    err = tmp_path / "writer-errors.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(build.HERMES_ENV, HERMES_HOME=str(tmp_path / "home"))
    w = subprocess.Popen([VENV_PY, "-c", WRITER, str(db), str(err)], stdout=subprocess.PIPE, env=env)
    try:
        assert w.stdout.readline().strip() == b"ready"
        # Hermes checkpoints on open; wait for the first appends to land in the WAL
        deadline = time.monotonic() + 30
        while os.path.getsize(str(db) + "-wal") == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        before = _sha(db)
        wal_before = os.path.getsize(str(db) + "-wal")
        for deep in (False, True):
            res = hermes_audit.main({"db_path": str(db), "deep": deep, "tooling": False})
            rec = res["databases"][0]
            assert rec["verdict"] == "healthy", rec["reasons"]
            assert rec["open_mode"] == "ro+readonly_shm"
            assert any(h["pid"] == w.pid for h in rec["holders"]["holders"])
        time.sleep(1.2)  # the writer keeps appending after the audit
        assert _sha(db) == before, "the main file changed: something checkpointed or wrote"
        assert os.path.getsize(str(db) + "-wal") > wal_before, "the WAL was reset or stopped growing"
    finally:
        w.terminate()
        w.wait(20)
    assert err.read_text() == "", err.read_text()


def test_closed_wal_db_gets_no_sidecars(standard_src, tmp_path):
    """A read-only open of a WAL file with no -wal would create empty -wal/-shm: the audit reads it immutable."""
    db = tmp_path / "state.db"
    build.standard_db(db)  # fresh from the cache: other readers may have left sidecars beside standard_src
    for s in ("-wal", "-shm"):
        assert not os.path.exists(str(db) + s)
    before = (_listing(tmp_path), _sha(db), os.stat(db).st_mtime_ns)
    rec = hermes_audit.main({"db_path": str(db), "deep": True, "tooling": False})["databases"][0]
    assert rec["verdict"] == "healthy" and rec["open_mode"] == "immutable"
    assert (_listing(tmp_path), _sha(db), os.stat(db).st_mtime_ns) == before


def _messages(path):
    """Rows of messages in the image SQLite opens (a private copy of the image, opened normally)."""
    d = tempfile.mkdtemp()
    try:
        for s in ("", "-wal"):
            if os.path.exists(str(path) + s):
                shutil.copyfile(str(path) + s, os.path.join(d, "state.db" + s))
        con = sqlite3.connect(os.path.join(d, "state.db"))
        try:
            return con.execute("SELECT count(*) FROM messages NOT INDEXED").fetchone()[0]
        finally:
            con.close()
    finally:
        shutil.rmtree(d)


def test_wal_without_shm_is_the_image_judged_and_no_shm_created(standard_src, tmp_path):
    """SQLite replays a -wal without -shm on its next open: the audit judges that image, from a
    private copy, and writes nothing beside the original."""
    db = tmp_path / "state.db"
    build.add_wal_tail(standard_src, db)
    if os.path.exists(str(db) + "-shm"):
        os.unlink(str(db) + "-shm")
    assert os.path.getsize(str(db) + "-wal") > 0
    before = {f: _sha(tmp_path / f) for f in _listing(tmp_path)}
    rec = hermes_audit.main({"db_path": str(db), "tooling": False})["databases"][0]
    assert {f: _sha(tmp_path / f) for f in _listing(tmp_path)} == before
    assert rec["verdict"] == "healthy", rec["reasons"]
    assert "wal_replayed" in [w["code"] for w in rec["warnings"]]
    assert rec["wal"]["frames_committed"] > 0
    assert rec["honesty"]["messages"]["count_scan"] == _messages(db)    # the tail's rows are counted


def test_stale_wal_frames_named_for_what_they_are(standard_src, tmp_path):
    db = tmp_path / "state.db"
    build.with_stale_wal(standard_src, db)
    if os.path.exists(str(db) + "-shm"):
        os.unlink(str(db) + "-shm")
    rec = hermes_audit.main({"db_path": str(db), "tooling": False})["databases"][0]
    assert rec["wal"]["stale_frames"] > 0
    msg = [w["msg"] for w in rec["warnings"] if w["code"] == "wal_replayed"][0]
    assert "%d frames of an earlier WAL generation" % rec["wal"]["stale_frames"] in msg
    assert rec["verdict"] == "healthy", rec["reasons"]
    assert rec["honesty"]["messages"]["count_scan"] == _messages(db)


def test_foreign_wal_is_not_healthy(standard_src, tmp_path):
    """A -wal of another store beside state.db: SQLite would lay its frames over this file, so the
    image it opens is damaged, and the audit must not call the main file alone healthy."""
    other = tmp_path / "other" / "state.db"
    build.realistic_db(other, sessions=6, seed=99)
    build.add_wal_tail(other, tmp_path / "other2" / "state.db")
    db = tmp_path / "state.db"
    shutil.copyfile(standard_src, db)
    shutil.copyfile(str(tmp_path / "other2" / "state.db") + "-wal", str(db) + "-wal")
    rec = hermes_audit.main({"db_path": str(db), "tooling": False})["databases"][0]
    assert rec["wal"]["frames_committed"] > 0
    assert rec["verdict"] != "healthy", rec["warnings"]
    assert not os.path.exists(str(db) + "-shm")