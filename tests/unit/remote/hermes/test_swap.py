"""Quarantine, swap, rollback and the swap journal, on real three-file Hermes images."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest

from fleetops.remote.hermes import image_swap, steplib
from fleetops.remote.hermes import quarantine as hermes_quarantine
from fleetops.remote.hermes import rollback as hermes_rollback
from fleetops.remote.hermes import start_writers as hermes_start_writers
from fleetops.remote.hermes import swap as hermes_swap
from tests.corpus import build
from tests.support.fault_injection import SWAP_INTERRUPT_EXIT, swap_cut_source

from tests.support.hermes_procs import args_for, run_payload_subprocess, start_desktop

SIDE = ("", "-wal", "-shm")


def sha(p):
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def image_shas(db):
    return {s: sha(str(db) + s) for s in SIDE if os.path.exists(str(db) + s)}


@pytest.fixture
def wal_home(tmp_path, wal_image):
    root = tmp_path / "hermes"
    root.mkdir(mode=0o700)
    build.copy_image(wal_image, root / "state.db")
    return root


def make_new_db(tmp_path, src_db):
    """A different, valid database to swap in (VACUUM INTO of the image plus one marker row)."""
    out = tmp_path / "work" / "new.db"
    out.parent.mkdir(exist_ok=True)
    scratch = tmp_path / "work" / "scratch" / "state.db"
    build.copy_image(Path(src_db), scratch)  # never open the image itself: that would checkpoint it
    c = sqlite3.connect(str(scratch))
    c.execute("VACUUM INTO ?", (str(out),))
    c.close()
    c = sqlite3.connect(str(out))
    c.execute("INSERT INTO state_meta(key, value) VALUES ('fleetops_test_marker', 'new')")
    c.commit()
    c.close()
    return out


def quarantine(root):
    r = hermes_quarantine.main(args_for(root, action="quarantine"))
    assert not r["failed"], r["msg"]
    return r["quarantine_dir"], r["manifest"]


def test_quarantine_swap_rollback_round_trip(wal_home, tmp_path):
    db = wal_home / "state.db"
    orig = image_shas(db)
    assert set(orig) == {"", "-wal", "-shm"}
    orig_ino = os.stat(db).st_ino
    qdir, man = quarantine(wal_home)
    assert {n: f["sha256"] for n, f in man["files"].items()} == {"state.db" + s: h for s, h in orig.items()}
    for s, h in orig.items():
        copy = Path(qdir) / "copy" / ("state.db" + s)
        assert sha(copy) == h and stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert stat.S_IMODE(os.stat(qdir).st_mode) == 0o700
    assert image_shas(db) == orig  # the quarantine only copies

    new = make_new_db(tmp_path, db)
    new_sha = sha(new)
    r = hermes_swap.main(args_for(wal_home, action="swap", new_db=str(new), quarantine_dir=qdir,
                                  expect_sha256=new_sha))
    assert not r["failed"], r["msg"]
    assert sha(db) == new_sha
    assert not os.path.exists(str(db) + "-wal") and not os.path.exists(str(db) + "-shm")
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    out = Path(r["swap"]["swapped_out_dir"])
    assert out.parent == Path(qdir)
    assert {s: sha(out / ("state.db" + s)) for s in orig} == orig  # the originals, moved by rename
    assert os.stat(out / "state.db").st_ino == orig_ino
    c = sqlite3.connect(str(db))
    assert c.execute("SELECT value FROM state_meta WHERE key='fleetops_test_marker'").fetchone() == ("new",)
    c.close()
    j = json.loads((wal_home / "fleetops" / "state" / "swap-journal.json").read_text())
    assert j["status"] == "done"

    r = hermes_rollback.main(args_for(wal_home, action="rollback", quarantine_dir=qdir))
    assert not r["failed"], r["msg"]
    assert image_shas(db) == orig  # exactly the original three files
    aside = Path(r["rollback"]["moved_aside_dir"])
    assert sha(aside / "state.db") == new_sha  # the repaired file was moved aside, not deleted
    # rolling back twice is a no-op, not a second move
    r = hermes_rollback.main(args_for(wal_home, action="rollback", quarantine_dir=qdir))
    assert not r["failed"] and not r["changed"]


def test_rollback_from_the_copy_when_the_originals_are_gone(wal_home, tmp_path):
    db = wal_home / "state.db"
    orig = image_shas(db)
    qdir, _ = quarantine(wal_home)
    new = make_new_db(tmp_path, db)
    r = hermes_swap.main(args_for(wal_home, new_db=str(new), quarantine_dir=qdir))
    assert not r["failed"], r["msg"]
    out = Path(r["swap"]["swapped_out_dir"])
    (out / "state.db").rename(tmp_path / "elsewhere.db")  # someone moved the swapped-out original away
    r = hermes_rollback.main(args_for(wal_home, action="rollback", quarantine_dir=qdir))
    assert not r["failed"], r["msg"]
    assert image_shas(db) == orig
    # the quarantined copy itself is still intact (a copy was restored, not the copy moved)
    assert sha(Path(qdir) / "copy" / "state.db") == orig[""]


def test_rollback_refuses_a_tampered_quarantine(wal_home, tmp_path):
    db = wal_home / "state.db"
    qdir, _ = quarantine(wal_home)
    new = make_new_db(tmp_path, db)
    assert not hermes_swap.main(args_for(wal_home, new_db=str(new), quarantine_dir=qdir))["failed"]
    for s in SIDE:
        p = Path(qdir) / "swapped-out" / ("state.db" + s)
        p.rename(tmp_path / ("gone" + s))
    with open(Path(qdir) / "copy" / "state.db", "r+b") as f:
        f.seek(5000)
        f.write(b"tampered")
    before = image_shas(db)
    r = hermes_rollback.main(args_for(wal_home, action="rollback", quarantine_dir=qdir))
    assert r["failed"] and "does not match its manifest" in r["msg"]
    assert image_shas(db) == before


def test_swap_refuses_when_state_db_changed_since_quarantine(home, tmp_path):
    db = home / "state.db"
    qdir, _ = quarantine(home)
    c = sqlite3.connect(str(db))
    c.execute("INSERT INTO state_meta(key, value) VALUES ('late_write', '1')")
    c.commit()
    c.close()
    before = image_shas(db)
    new = make_new_db(tmp_path, db)
    r = hermes_swap.main(args_for(home, new_db=str(new), quarantine_dir=qdir))
    assert r["failed"] and "differs from the quarantined image" in r["msg"]
    assert image_shas(db) == before and new.exists()


def test_quarantine_and_swap_refuse_under_a_holder(home, tmp_path, procs):
    db = home / "state.db"
    qdir, _ = quarantine(home)
    new = make_new_db(tmp_path, db)
    start_desktop(procs, db, respawns=0)
    before = image_shas(db)  # with the holder's own -wal/-shm
    r = hermes_swap.main(args_for(home, new_db=str(new), quarantine_dir=qdir))
    assert r["failed"] and "hermes serve --isolated" in r["msg"] and "refusing" in r["msg"]
    r = hermes_quarantine.main(args_for(home, action="quarantine"))
    assert r["failed"] and "refusing" in r["msg"]
    assert image_shas(db) == before and new.exists()
    assert len(os.listdir(home / "fleetops" / "quarantine")) == 1


def _state(db, orig, new_sha):
    """"new" or "original"; anything else fails the test (half-swapped)."""
    here = image_shas(db)
    if here == {"": new_sha}:
        return "new"
    if here == orig:
        return "original"
    raise AssertionError("half-swapped: %r (original %r, new %s)" % (here, orig, new_sha))


@pytest.mark.parametrize("prefer", ["finish", "rollback"])
@pytest.mark.parametrize("k", [0, 1, 2, 3, 4])
def test_interrupted_swap_is_finished_or_rolled_back(wal_home, tmp_path, k, prefer):
    db = wal_home / "state.db"
    orig = image_shas(db)
    qdir, _ = quarantine(wal_home)
    new = make_new_db(tmp_path, db)
    new_sha = sha(new)
    rc, res, err = run_payload_subprocess("hermes.swap", args_for(
        wal_home, new_db=str(new), quarantine_dir=qdir, expect_sha256=new_sha), inject=swap_cut_source(k), inject_into="hermes.swap_journal")
    assert rc == SWAP_INTERRUPT_EXIT and res is None, err  # killed mid-swap, no answer
    j = json.loads((wal_home / "fleetops" / "state" / "swap-journal.json").read_text())
    assert j["status"] == "pending"
    # writers must not start on a half-swapped store
    (wal_home / "fleetops" / "state" / "default-writers.json").write_text(json.dumps(
        {"status": "stopped", "units": [], "gateway": None, "processes": []}))
    st = hermes_start_writers.main(args_for(wal_home, action="start"))
    assert st["failed"] and "pending" in st["msg"]
    # the next run (here its quarantine step) resolves the journal first
    r = hermes_swap.main(args_for(wal_home, action="recover", prefer=prefer))
    assert not r["failed"], r["msg"]
    assert r["recovered"]["decision"] == prefer and r["recovered"]["steps_done_before"] == k
    state = _state(db, orig, new_sha)
    assert state == ("new" if prefer == "finish" else "original")
    if state == "new":
        out = Path(qdir) / "swapped-out"
        assert {s: sha(out / ("state.db" + s)) for s in orig} == orig
        assert stat.S_IMODE(os.stat(db).st_mode) == 0o600
    else:
        staged = list(wal_home.glob("state.db.fleetops-new-*"))
        assert [sha(p) for p in staged] == [new_sha]  # the new file kept aside, never deleted
        # and the same swap, run again, completes from the staged file
        r = hermes_swap.main(args_for(wal_home, new_db=str(new), quarantine_dir=qdir, expect_sha256=new_sha))
        assert not r["failed"], r["msg"]
        assert _state(db, orig, new_sha) == "new"
    for s, h in orig.items():  # the quarantined copy never changes
        assert sha(Path(qdir) / "copy" / ("state.db" + s)) == h
    j = json.loads((wal_home / "fleetops" / "state" / "swap-journal.json").read_text())
    assert j["status"] in ("done", "rolled_back")


def test_interrupted_swap_resolved_by_the_next_quarantine(wal_home, tmp_path):
    db = wal_home / "state.db"
    orig = image_shas(db)
    qdir, _ = quarantine(wal_home)
    new = make_new_db(tmp_path, db)
    new_sha = sha(new)
    rc, _, err = run_payload_subprocess("hermes.swap", args_for(
        wal_home, new_db=str(new), quarantine_dir=qdir), inject=swap_cut_source(2), inject_into="hermes.swap_journal")
    assert rc == SWAP_INTERRUPT_EXIT, err
    assert os.path.exists(db) and not os.path.exists(str(db) + "-wal")  # wal and shm moved, db not yet
    r = hermes_quarantine.main(args_for(wal_home, action="quarantine"))
    assert not r["failed"] and r["recovered"]["decision"] == "finish", r["msg"]
    assert _state(db, orig, new_sha) == "new"
    # and the new quarantine is of the file now in place
    assert r["manifest"]["files"] == {"state.db": r["manifest"]["files"]["state.db"]}
    assert r["manifest"]["files"]["state.db"]["sha256"] == new_sha


def test_check_mode_changes_nothing(wal_home, tmp_path):
    db = wal_home / "state.db"
    before = image_shas(db)
    r = hermes_quarantine.main(args_for(wal_home, action="quarantine", _check=True))
    assert not r["failed"] and "would copy" in r["msg"]
    assert not (wal_home / "fleetops").exists()
    qdir, _ = quarantine(wal_home)
    new = make_new_db(tmp_path, db)
    r = hermes_swap.main(args_for(wal_home, new_db=str(new), quarantine_dir=qdir, _check=True))
    assert not r["failed"] and "would move" in r["msg"], r["msg"]
    assert image_shas(db) == before and new.exists()


def test_no_fault_hook_in_the_product(tmp_path):
    """Killing the swap between renames is the tests' own doing (tests/support/fault_injection.py): no
    module argument, payload argument or environment variable of the product reaches one."""
    from fleetops.engine.playbook import load_playbook
    from fleetops.errors import BadInput
    from fleetops.extensions import registry

    book = tmp_path / "p.yml"
    for module in ("hermes_swap", "hermes_rollback"):
        book.write_text(f"- hosts: all\n  tasks:\n    - {module}: {{fail_after_step: 1}}\n")
        with pytest.raises(BadInput, match=f"unknown argument 'fail_after_step' for module '{module}'"):
            load_playbook(str(book), registry().modules)
    product = Path(hermes_swap.__file__).resolve().parents[2]
    for path in product.rglob("*.py"):
        text = path.read_text()
        for word in ("fail_after", "FLEETOPS_TEST_", "selftest"):
            assert word not in text, f"{path}: {word}"


def test_cut_off_quarantine_is_set_aside_by_the_next(wal_home):
    """A quarantine dir with no manifest (the copy was cut off) is renamed *.incomplete, with its
    files kept, by the next quarantine; complete ones and the pointer are left alone."""
    qdir1, _ = quarantine(wal_home)
    base = Path(qdir1).parent
    cut = base / "default-20260101T000000Z"
    (cut / "copy").mkdir(parents=True, mode=0o700)
    (cut / "copy" / "state.db").write_bytes(b"half a copy")
    r = hermes_quarantine.main(args_for(wal_home, action="quarantine"))
    assert not r["failed"], r["msg"]
    assert not cut.exists()
    kept = base / "default-20260101T000000Z.incomplete"
    assert (kept / "copy" / "state.db").read_bytes() == b"half a copy"
    assert Path(qdir1).is_dir() and (Path(qdir1) / "manifest.json").exists()
    assert r["manifest"]["set_aside"] and "default-20260101T000000Z.incomplete" in r["msg"]
    assert image_swap.latest_quarantine(steplib.locate(args_for(wal_home))) == r["quarantine_dir"]


def test_state_db_never_stands_empty_during_the_swap_or_the_rollback(wal_home, tmp_path):
    """A Hermes backend that respawns and opens state.db at the wrong moment would make SQLite
    create a new, empty store there (seen: the swap then refused, and the repair failed, under
    load): the old file is hard-linked aside and the new one renamed over it, so the path is
    never missing. A watcher looks at the path the whole time; the journals say how it was done."""
    import threading

    db = wal_home / "state.db"
    qdir, _ = quarantine(wal_home)
    new = make_new_db(tmp_path, db)
    missing, stop = [], threading.Event()

    def watch():
        while not stop.is_set():
            if not os.path.lexists(db):
                missing.append(1)

    t = threading.Thread(target=watch)
    t.start()
    try:
        r = hermes_swap.main(args_for(wal_home, action="swap", new_db=str(new), quarantine_dir=qdir,
                                      expect_sha256=sha(new)))
        assert not r["failed"], r["msg"]
        rb = hermes_rollback.main(args_for(wal_home, action="rollback", quarantine_dir=qdir))
        assert not rb["failed"], rb["msg"]
    finally:
        stop.set()
        t.join()
    assert not missing
    for name in (r["swap"]["journal"], rb["rollback"]["journal"]):
        j = json.loads((Path(qdir) / ("%s.journal.json" % name)).read_text())
        by_role = {m["role"]: m.get("mode") for m in j["moves"]}
        aside, incoming = ("original-db", "new") if name.startswith("swap") else ("current-db", "original-db")
        assert (by_role[aside], by_role[incoming]) == ("link", "replace"), j["moves"]
