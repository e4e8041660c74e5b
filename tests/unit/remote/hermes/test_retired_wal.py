"""retired_wal: the rows a halted Hermes 0.22 committed only into its deleted WAL, merged back.

The halt is the real one: a process of the 0.22 venv appends messages through its own SessionDB
to a WAL store, the -wal and -shm are deleted under it, and its next write raises
DeletedWalGenerationError and writes Hermes' own state.db.retired-wal-* capture.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess

import pytest

from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import retired_wal, steplib, verify
from tests.corpus import build
from tests.support.hermes_procs import hermes_env

VERSION = "0.22.2"
ACKED = 26
WRITER = r'''
import json, sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
sid = "halted-writer"
db.create_session(sid, "cli", model="m")
ids = [db.append_message(sid, "user", content="acknowledged %d" % i) for i in range(int(sys.argv[2]))]
print(json.dumps(ids), flush=True)
sys.stdin.readline()
try:
    db.append_message(sid, "user", content="after the deletion")
    print("wrote", flush=True)
except Exception as exc:
    print(type(exc).__name__, flush=True)
sys.stdin.readline()
'''


@pytest.fixture
def halted(tmp_path, std_src_22):
    """(loc, acked ids, the writer process): a 0.22 store halted by its deleted sidecars."""
    root = tmp_path / "hermes"
    root.mkdir(mode=0o700)
    build.copy_image(std_src_22, root / "state.db")
    c = sqlite3.connect(root / "state.db")
    assert c.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    c.close()
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    p = subprocess.Popen([str(build.venv_python(VERSION)), str(script), str(root / "state.db"), str(ACKED)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=hermes_env(root), text=True)
    try:
        acked = json.loads(p.stdout.readline())
        for s in ("-wal", "-shm"):
            os.unlink(str(root / "state.db") + s)
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "DeletedWalGenerationError"
        yield steplib.locate({"hermes_home": str(root)}), acked, p
    finally:
        p.kill()
        p.wait()


@pytest.fixture(scope="module")
def std_src_22(tmp_path_factory):
    try:
        build.venv_python(VERSION)
    except build.HermesVenvMissing as exc:
        pytest.skip(str(exc))
    p = tmp_path_factory.mktemp("std22") / "state.db"
    build.standard_db(p, hermes=VERSION)
    return p


def ids(db, sql="SELECT id FROM messages NOT INDEXED"):
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return [r[0] for r in c.execute(sql)]
    finally:
        c.close()


def target(loc, tmp_path):
    t = tmp_path / "work" / "state.db"
    t.parent.mkdir()
    shutil.copyfile(loc["db"], t)
    return str(t)


def test_rows_only_in_hermes_capture_come_back_once(halted, tmp_path):
    loc, acked, _p = halted
    assert not set(acked) & set(ids(loc["db"])), "the acknowledged rows reached the main file"
    srcs = retired_wal.sources(loc)
    assert [s["origin"].startswith("hermes capture (halt") for s in srcs] == [True]
    t = target(loc, tmp_path)
    rep = retired_wal.merge(t, srcs, str(tmp_path / "m1"), loc["db"])
    assert rep["merged_by_table"] == {"messages": ACKED, "sessions": 1}, rep
    have = ids(t)
    assert set(acked) <= set(have) and len(have) == len(set(have))
    again = retired_wal.merge(t, retired_wal.sources(loc), str(tmp_path / "m2"), loc["db"])
    assert again["merged_total"] == 0 and ids(t) == have
    c = sqlite3.connect(t)
    try:
        assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert c.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'acknowledged'").fetchone()[0] == ACKED
        assert verify.duplicate_messages(c)["groups"] == 0
    finally:
        c.close()


def test_a_message_stored_under_another_id_is_not_merged_twice(halted, tmp_path):
    """A replay already put one acknowledged message into the store under a new id: the merge
    brings back the other 25 and the session, and verify sees no message twice."""
    loc, acked, _p = halted
    scratch = target(loc, tmp_path)
    retired_wal.merge(scratch, retired_wal.sources(loc), str(tmp_path / "m0"), loc["db"])
    c = sqlite3.connect(scratch)
    sess = c.execute("SELECT * FROM sessions WHERE id = 'halted-writer'").fetchone()
    msg = c.execute("SELECT session_id, role, content, timestamp FROM messages WHERE id = ?", (acked[3],)).fetchone()
    c.close()
    t = tmp_path / "replayed" / "state.db"
    t.parent.mkdir()
    shutil.copyfile(loc["db"], t)
    c = sqlite3.connect(t)
    c.execute("INSERT INTO sessions VALUES (%s)" % ", ".join("?" * len(sess)), sess)
    c.execute("INSERT INTO messages(id, session_id, role, content, timestamp) VALUES (?, ?, ?, ?, ?)",
              (acked[-1] + 1000,) + tuple(msg))
    c.commit()
    c.close()
    rep = retired_wal.merge(str(t), retired_wal.sources(loc), str(tmp_path / "m1"), loc["db"])
    m = rep["sources"][0]["tables"]["messages"]
    assert (m["merged"], m["same_message_present"]) == (ACKED - 1, 1), m
    assert acked[3] not in ids(t)
    c = sqlite3.connect(t)
    try:
        assert verify.duplicate_messages(c) == {"groups": 0, "extra_rows": 0, "examples": []}
        c.execute("INSERT INTO messages(session_id, role, content, timestamp) VALUES (?, ?, ?, ?)", msg)
        assert verify.duplicate_messages(c)["extra_rows"] == 1      # what two replays leave is seen
    finally:
        c.close()


def test_the_deleted_wal_a_holder_keeps_open_is_read_through_proc(halted, tmp_path):
    loc, acked, p = halted
    for d in retired_wal.sources(loc):      # as if Hermes' capture had failed (a full disk)
        shutil.move(d["dir"], str(tmp_path / os.path.basename(d["dir"])))
    holder = [h for h in hermes_holders.scan(loc["db"])["holders"] if h["pid"] == p.pid]
    assert holder and holder[0]["retired"], holder
    got = retired_wal.capture_open(loc, holder)
    assert len(got) == 1 and got[0].get("dir"), got
    assert oct(os.stat(got[0]["dir"]).st_mode & 0o777) == "0o700"
    assert all(oct(os.stat(os.path.join(got[0]["dir"], f)).st_mode & 0o777) == "0o600"
               for f in os.listdir(got[0]["dir"]))
    srcs = retired_wal.sources(loc)
    assert [s["origin"] for s in srcs] == ["open fd %d of PID %d" % (got[0]["fd"], p.pid)]
    t = target(loc, tmp_path)
    rep = retired_wal.merge(t, srcs, str(tmp_path / "m"), loc["db"])
    assert rep["merged_by_table"].get("messages") == ACKED, rep
    assert set(acked) <= set(ids(t))


def test_check_mode_names_the_merge_and_changes_nothing(halted):
    from fleetops.remote.hermes import repair
    from fleetops.remote.host.durable import sha256_file
    loc, _acked, _p = halted
    before = sha256_file(loc["db"])
    res = repair.main({"hermes_home": loc["root"], "_check": True})
    assert not res["failed"] and res["retired_wal_sources"] == 1
    assert "merge the rows it lacks from 1 retired WAL capture(s)" in res["msg"]
    assert sha256_file(loc["db"]) == before and not os.path.exists(loc["fleetops"])
