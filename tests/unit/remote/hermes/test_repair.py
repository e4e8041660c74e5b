"""hermes_repair on the corpus' damaged stores, and the whole host-side chain on a live Hermes home."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from pathlib import Path

import pytest

from fleetops.remote.hermes import quarantine as hermes_quarantine
from fleetops.remote.hermes import repair as hermes_repair
from fleetops.remote.hermes import rollback as hermes_rollback
from fleetops.remote.hermes import snapshot as hermes_snapshot
from fleetops.remote.hermes import start_writers as hermes_start_writers
from fleetops.remote.hermes import stop_writers as hermes_stop_writers
from fleetops.remote.hermes import swap as hermes_swap
from fleetops.remote.hermes import verify as hermes_verify
from fleetops.remote.sqlite import salvage as salvage_mod
from tests.support import hermes_matrix
from tests.corpus import build, damage

from tests.support.hermes_procs import HERMES, args_for, holders, start_desktop, start_gateway

FAST = dict(quiet_window=2.5, deadline=90, grace=3, systemd="false")


def sha(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def rowids(db, table):
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return set(r[0] for r in c.execute("SELECT rowid FROM %s NOT INDEXED" % table))
    finally:
        c.close()


def seeded(tmp_path, std_image, case):
    root = tmp_path / "hermes"
    d = damage.make(case, std_image, root / "state.db")
    return root, d


def quarantine(root):
    q = hermes_quarantine.main(args_for(root, action="quarantine"))
    assert not q["failed"], q["msg"]
    return q


def test_healthy_image_needs_nothing(home):
    q = quarantine(home)
    r = hermes_repair.main(args_for(home))
    assert not r["failed"] and r["path"] == "none" and r["new_db"] is None and not r["swap"], r["msg"]
    assert r["expect_counts"]["messages"] == len(rowids(home / "state.db", "messages"))
    assert sha(home / "state.db") == q["manifest"]["files"]["state.db"]["sha256"]


def header_journal_mode(db):
    with open(db, "rb") as fh:
        return "wal" if fh.read(20)[18:20] == b"\x02\x02" else "delete"


def fts_config(db):
    c = sqlite3.connect("file:%s?mode=ro&immutable=1" % db, uri=True)
    try:
        return {n: c.execute("SELECT * FROM %s ORDER BY k" % n).fetchall() for (n,) in c.execute(
            "SELECT name FROM sqlite_master WHERE name LIKE 'messages_fts%_config'")}
    finally:
        c.close()


@pytest.mark.parametrize("version", hermes_matrix.ALL)
def test_fts_damage_is_rebuilt_on_a_copy(tmp_path, image_of, version):
    root, d = seeded(tmp_path, image_of(version), "fts_pages_overwritten")
    q = quarantine(root)
    r = hermes_repair.main(args_for(root))
    assert not r["failed"], r["msg"]
    assert r["verdict"] == "fts_index_damage" and r["path"] == "fts_rebuild" and r["loss_rows"] == 0
    new = r["new_db"]
    assert os.stat(new).st_mode & 0o777 == 0o600 and sha(new) == r["new_sha256"]
    for t, ids in d.expected_rows.items():
        assert rowids(new, t) == ids, t
    assert hermes_repair.audit_file(new, "default")["verdict"] == "healthy"
    chk = hermes_verify.read_checks(new, r["expect_counts"], "exact")
    assert chk["quick_check"]["ok"] and not chk["count_problems"] and not chk["fts_problems"]
    assert all(v["ok"] for v in chk["fts"].values()) and len(chk["fts"]) == 2
    # what the source was: journal mode, FTS settings
    assert header_journal_mode(new) == header_journal_mode(image_of(version))
    assert fts_config(new) == fts_config(image_of(version)) and fts_config(new)
    # nothing but copies was touched
    assert sha(root / "state.db") == q["manifest"]["files"]["state.db"]["sha256"]
    for n, f in q["manifest"]["files"].items():
        assert sha(Path(q["quarantine_dir"]) / "copy" / n) == f["sha256"]


@pytest.mark.parametrize("version,case", [(hermes_matrix.OLDEST, "session_duplicated_behind_title_index")] + [
    (v, "garbage_leaf_pages") for v in hermes_matrix.ALL])
def test_structural_damage_is_salvaged(tmp_path, image_of, version, case):
    root, d = seeded(tmp_path, image_of(version), case)
    quarantine(root)
    r = hermes_repair.main(args_for(root))
    assert not r["failed"], r["msg"]
    assert r["verdict"] == "structural_corruption" and r["path"] == "salvage" and r["loss_rows"] == 0
    for t, ids in d.expected_rows.items():
        assert rowids(r["new_db"], t) == ids, t
    assert header_journal_mode(r["new_db"]) == header_journal_mode(image_of(version))
    rep = json.loads(Path(r["report_path"]).read_text())
    assert rep["result"] == "ready" and rep["output_audit"]["verdict"] == "healthy"
    assert json.loads((root / "fleetops" / "state" / "default-repair.json").read_text()) == rep


def test_more_loss_than_allowed_is_not_swapped(tmp_path, std_image, monkeypatch):
    """The decision, not salvage: a real salvage whose report is made to claim 3 lost rows."""
    root, d = seeded(tmp_path, std_image, "garbage_leaf_pages")
    q = quarantine(root)
    real = salvage_mod.salvage

    def lossy(*a, **kw):
        rep = real(*a, **kw)
        rep["loss_rows"] = 3
        rep["tables"]["messages"]["loss_rows"] = 3
        rep["lost_known_from_indexes"] = rep["tables"]["messages"]["lost_known_from_indexes"] = 0
        return rep
    monkeypatch.setattr(salvage_mod, "salvage", lossy)
    r = hermes_repair.main(args_for(root, max_loss_rows=0))
    assert r["failed"] and not r["swap"] and "lose 3 row(s)" in r["msg"] and "messages 3" in r["msg"]
    assert "restarted what was running" in r["msg"]
    assert r["report"]["result"] == "refused_loss"
    assert sha(root / "state.db") == q["manifest"]["files"]["state.db"]["sha256"]
    r = hermes_repair.main(args_for(root, max_loss_rows=3))
    assert not r["failed"] and r["swap"], r["msg"]


def test_unrepairable_image_fails_without_a_new_file(tmp_path, std_image):
    root, d = seeded(tmp_path, std_image, "not_sqlite")
    quarantine(root)
    r = hermes_repair.main(args_for(root))
    assert r["failed"] and not r.get("swap"), r["msg"]
    assert sha(root / "state.db") == sha(Path(r["report"]["quarantine_dir"]) / "copy" / "state.db")


def test_check_mode_names_the_path_and_changes_nothing(tmp_path, std_image):
    root, d = seeded(tmp_path, std_image, "fts_pages_overwritten")
    before = sha(root / "state.db")
    r = hermes_repair.main(args_for(root, _check=True))
    assert not r["failed"] and r["path"] == "fts_rebuild" and r["verdict"] == "fts_index_damage", r["msg"]
    assert sha(root / "state.db") == before and not (root / "fleetops").exists()


def test_whole_chain_on_a_live_home_then_rollback(tmp_path, std_image, procs):
    """snapshot, stop (real gateway + respawning desktop backend), quarantine, repair, swap,
    start, verify through `hermes sessions stats`; then roll back to the damaged original exactly."""
    root, d = seeded(tmp_path, std_image, "garbage_leaf_pages")
    db = root / "state.db"
    gw = start_gateway(procs, root)
    start_desktop(procs, db, respawns=1, delay=1.0)
    a = args_for(root, run_id="run-1")

    snap = hermes_snapshot.main(a)
    assert not snap["failed"], snap["msg"]
    stop = hermes_stop_writers.main(dict(a, action="stop", **FAST))
    assert not stop["failed"], stop["msg"]
    assert holders(db) == []
    q = hermes_quarantine.main(dict(a, action="quarantine"))
    assert not q["failed"], q["msg"]
    rep = hermes_repair.main(a)
    assert not rep["failed"] and rep["swap"], rep["msg"]
    sw = hermes_swap.main(dict(a, action="swap", new_db=rep["new_db"], expect_sha256=rep["new_sha256"]))
    assert not sw["failed"], sw["msg"]
    st = hermes_start_writers.main(dict(a, action="start", wait_timeout=180))
    for s in st.get("started", []):
        procs.add_pid(s.get("pid"))
    assert not st["failed"], st["msg"]
    assert holders(db, "gateway")
    env = {k: v for k, v in build.HERMES_ENV.items()}
    ver = hermes_verify.main(dict(a, expect_counts=rep["expect_counts"], hermes_bin=str(HERMES), hermes_env=env))
    assert not ver["failed"], ver["msg"]
    assert ver["checks"]["hermes_sessions_stats"]["ok"]
    for t, ids in d.expected_rows.items():
        assert ids <= rowids(db, t), t  # every recoverable row is in the live store
    # the damaged original (as the stopped gateway left it: it checkpoints on close) is intact in
    # quarantine, by sha256, both the copy and the files the swap moved aside
    qdir = Path(q["quarantine_dir"])
    files = q["manifest"]["files"]
    for n, f in files.items():
        assert sha(qdir / "copy" / n) == f["sha256"]
        assert sha(qdir / "swapped-out" / n) == f["sha256"]
    assert (Path(snap["snapshot_dir"]) / "manifest.json").exists()

    # rollback: writers stopped again, the damaged original back exactly, the repaired file kept aside
    stop2 = hermes_stop_writers.main(dict(a, action="stop", **FAST))
    assert not stop2["failed"], stop2["msg"]
    rb = hermes_rollback.main(dict(a, action="rollback"))
    assert not rb["failed"], rb["msg"]
    for n, f in files.items():
        assert sha(root / n) == f["sha256"]
    assert sorted(os.listdir(rb["rollback"]["moved_aside_dir"]))[0] == "state.db"
    assert gw.poll() is not None
