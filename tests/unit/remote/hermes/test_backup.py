"""The backup job on real files: a realistic Hermes 0.19.0 state.db, the script run as its own process."""
from __future__ import annotations

import fcntl
import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time


from fleetops.remote.hermes import audit_backups
from fleetops.remote.hermes import backup as hb
from tests.support.backup import backups_in, counts, integrity, manifest_of, run_job
from tests.corpus import build, damage

MANIFEST_FIELDS = {"path", "created", "size", "sha256", "integrity", "source", "source_page_count",
                   "duration_seconds", "fleetops_version"}


def sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_verified_backup_and_manifest(profile):
    src_counts = counts(profile / "state.db")
    r = run_job("--profile-dir", profile)
    assert r.returncode == 0, r.stderr
    dest = profile / "fleetops" / "backups"
    [db] = backups_in(dest)
    m = manifest_of(db)
    assert MANIFEST_FIELDS <= set(m)
    assert m["integrity"] == "ok" and m["path"] == str(db) and m["source"] == str(profile / "state.db")
    assert m["size"] == db.stat().st_size and m["sha256"] == sha(db)
    assert m["fleetops_version"] == hb.VERSION
    assert m["created"].endswith("Z") and db.name == "state-%sZ.db" % m["created"][:19].replace("-", "").replace(":", "")
    # the copy is the live image including the conversation that was only in the WAL
    assert counts(db) == src_counts
    assert integrity(db) == ["ok"]
    assert m["source_page_count"] == m["page_count"] > 100
    # one self-contained file: no -wal/-shm beside it, no temp files left
    assert sorted(p.name for p in dest.iterdir()) == sorted([".backup.lock", db.name, db.with_suffix(".json").name])
    for p in (db, db.with_suffix(".json"), dest / ".backup.lock", profile / "fleetops" / "logs" / "backup.log"):
        assert mode(p) == 0o600, p
    for d in (profile / "fleetops", dest, profile / "fleetops" / "logs"):
        assert mode(d) == 0o700, d
    log = (profile / "fleetops" / "logs" / "backup.log").read_text()
    assert "verified backup %s" % db in log and "checkpoint(TRUNCATE) done" in log
    assert "verified backup" in r.stderr            # stderr too (the journal under systemd)
    # the WAL was checkpointed into state.db and truncated, nothing lost
    wal = profile / "state.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    assert counts(profile / "state.db") == src_counts
    # what `fleetops audit` reads for "last verified backup"
    home = str(profile)
    b = audit_backups.backups(home, str(profile / "state.db"), "default", home, time.time(), verify_sha256=True)
    assert b["newest_verified"]["path"] == str(db) and b["newest_verified"]["age_hours"] < 1


def test_retention_keeps_exactly_n_and_only_its_own(profile):
    dest = profile / "fleetops" / "backups"
    dest.mkdir(parents=True)
    foreign = {dest / "state-20200101T000000Z.db": b"not ours: no manifest",
               dest / "notes.txt": b"operator notes"}
    for p, data in foreign.items():
        p.write_bytes(data)
    made = []
    for _ in range(4):
        r = run_job("--profile-dir", profile, "--keep", "2")
        assert r.returncode == 0, r.stderr
        made.append(next(p for p in backups_in(dest) if p not in made and p not in foreign))
    assert len(set(made)) == 4
    left = [p for p in backups_in(dest) if p not in foreign]
    assert left == sorted(made[-2:])                 # exactly the newest two
    for p in left:
        assert manifest_of(p)["integrity"] == "ok"
    for p in made[:2]:
        assert not p.exists() and not p.with_suffix(".json").exists()
    for p, data in foreign.items():
        assert p.read_bytes() == data
    assert "retention: removed %s" % made[0] in (profile / "fleetops" / "logs" / "backup.log").read_text()


def test_damaged_source_fails_and_keeps_earlier_backups(profile, tmp_path):
    r = run_job("--profile-dir", profile)
    assert r.returncode == 0, r.stderr
    dest = profile / "fleetops" / "backups"
    [good] = backups_in(dest)
    good_sha = sha(good)
    # the live file becomes a copy with random bytes over three messages leaf pages
    pristine = tmp_path / "pristine" / "state.db"
    build.realistic_db(pristine, **build.STANDARD)
    for s in ("", "-wal", "-shm"):
        if os.path.exists(str(profile / "state.db") + s):
            os.unlink(str(profile / "state.db") + s)
    d = damage.make("garbage_leaf_pages", pristine, profile / "state.db")
    assert d.pages
    before = sha(profile / "state.db")
    r = run_job("--profile-dir", profile)
    assert r.returncode == hb.RC_FAILED, r.stderr
    assert backups_in(dest) == [good] and sha(good) == good_sha
    assert manifest_of(good)["integrity"] == "ok"
    assert not [p for p in os.listdir(dest) if p.startswith(".state-")]      # the bad copy is gone
    log = (profile / "fleetops" / "logs" / "backup.log").read_text().splitlines()[-1]
    assert "ERROR" in log and "integrity_check failed" in log and "1 earlier verified backup(s) kept" in log
    assert "integrity_check failed" in r.stderr
    assert sha(profile / "state.db") == before     # never written, never checkpointed


WRITER = textwrap.dedent("""
    import os, sqlite3, sys, time
    db, stop = sys.argv[1], sys.argv[2]
    conn = sqlite3.connect(db, timeout=1.0, isolation_level=None)   # as Hermes opens it
    conn.execute("PRAGMA foreign_keys=ON")
    session = conn.execute("SELECT id FROM sessions ORDER BY started_at LIMIT 1").fetchone()[0]
    n = errors = retries = 0
    while not os.path.exists(stop):
        for attempt in range(5):        # BEGIN IMMEDIATE with short retries, as Hermes writes
            try:
                conn.execute("BEGIN IMMEDIATE")
                cur = conn.execute("INSERT INTO messages(session_id, role, content, timestamp) "
                                   "VALUES (?, 'user', ?, ?)", (session, "writer %d" % (n + 1), time.time()))
                conn.execute("INSERT INTO writer_log(n, msg_id) VALUES (?, ?)", (n + 1, cur.lastrowid))
                conn.execute("COMMIT")
                n += 1
                break
            except sqlite3.Error as e:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if "locked" in str(e) or "busy" in str(e):
                    retries += 1
                    continue
                errors += 1
                print("error: %s" % e, flush=True)
                break
        else:
            errors += 1
            print("error: gave up after retries", flush=True)
        time.sleep(0.05)
    conn.close()
    print("done n=%d errors=%d retries=%d" % (n, errors, retries), flush=True)
""")


def writer_count(db) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT coalesce(max(n), 0) FROM writer_log").fetchone()[0]
    finally:
        conn.close()


def test_live_writer_during_backup(profile, tmp_path):
    db = profile / "state.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE writer_log(n INTEGER PRIMARY KEY, msg_id INTEGER NOT NULL)")
    (tmp_path / "writer.py").write_text(WRITER)
    stop = tmp_path / "stop"
    writer = subprocess.Popen([sys.executable, str(tmp_path / "writer.py"), str(db), str(stop)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = {}

    def hold_until_writes_land(remaining, total):
        """After the first step, let the writer commit 3 more rows before the copy continues."""
        if seen:
            return
        seen["at_first_step"] = writer_count(db)
        give_up = time.monotonic() + 120          # a guard against hanging, not an assertion
        while writer_count(db) < seen["at_first_step"] + 3 and time.monotonic() < give_up:
            assert writer.poll() is None, writer.stdout.read()
            time.sleep(0.02)
        seen["released_at"] = writer_count(db)

    try:
        while writer_count(db) < 2:                # the writer is running before the backup starts
            assert writer.poll() is None, writer.stdout.read()
            time.sleep(0.02)
        out = hb.backup_profile(profile, keep=2, step_pages=8, progress=hold_until_writes_land)
        after_backup = writer_count(db)
    finally:
        stop.write_text("")
        tail, _ = writer.communicate(timeout=60)
    assert writer.returncode == 0 and "errors=0" in tail and "error:" not in tail, tail
    assert out["rc"] == 0, out["msg"]
    assert seen["released_at"] >= seen["at_first_step"] + 3          # writes landed mid-copy
    copy = out["manifest"]["path"]
    assert integrity(copy) == ["ok"]
    conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
    try:
        copied_n, copied_rows = conn.execute("SELECT coalesce(max(n), 0), count(*) FROM writer_log").fetchone()
        writer_msgs = conn.execute("SELECT count(*) FROM messages WHERE content LIKE 'writer %'").fetchone()[0]
        fts = conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'writer'").fetchone()[0]
    finally:
        conn.close()
    # one snapshot, taken before the first step: every committed write up to it, none after it
    assert copied_rows == copied_n == writer_msgs == fts
    assert 2 <= copied_n <= seen["at_first_step"] < after_backup
    assert out["checkpoint"] is not None     # done, or skipped because the writer was busy


def test_no_space_refused_and_earlier_backups_kept(profile, monkeypatch):
    assert hb.backup_profile(profile)["rc"] == 0
    dest = profile / "fleetops" / "backups"
    [good] = backups_in(dest)
    db = str(profile / "state.db")
    need = int((hb.file_size(db) + hb.file_size(db + "-wal")) * 1.1)
    monkeypatch.setattr(hb, "free_bytes", lambda path: need - 1)
    out = hb.backup_profile(profile, log=hb.Log(str(profile / "fleetops" / "logs" / "backup.log"), stderr=False))
    assert out["rc"] == hb.RC_NO_SPACE
    assert out["msg"].startswith("refusing: %d bytes free" % (need - 1)) and "need %d" % need in out["msg"]
    assert backups_in(dest) == [good]
    assert not [p for p in os.listdir(dest) if p.startswith(".state-")]
    monkeypatch.setattr(hb, "free_bytes", lambda path: need)
    assert hb.backup_profile(profile)["rc"] == 0          # exactly the margin is enough


def test_lock_keeps_two_runs_apart(profile):
    dest = profile / "fleetops" / "backups"
    dest.mkdir(parents=True)
    fd = os.open(dest / ".backup.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        r = run_job("--profile-dir", profile)
        assert r.returncode == hb.RC_LOCKED
        assert "another backup run holds" in r.stderr
        assert backups_in(dest) == []
    finally:
        os.close(fd)
    assert run_job("--profile-dir", profile).returncode == 0


def test_bad_input_is_one_line_and_never_creates_a_database(tmp_path):
    for args, text in ((["--profile-dir", tmp_path, "--keep", "0"], "--keep must be >= 1"),
                       (["--keep", "2"], "--profile-dir"),
                       (["--profile-dir", tmp_path, "--random-delay", "soon"], "--random-delay"),
                       (["--profile-dir", tmp_path / "nope"], "no state.db in")):
        r = run_job(*args)
        assert r.returncode == hb.RC_BAD_INPUT, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and text in r.stderr, r.stderr
    assert not (tmp_path / "nope").exists() and not (tmp_path / "state.db").exists()


def test_rollback_journal_source_and_several_profiles(profile, tmp_path):
    other = tmp_path / "home" / ".hermes" / "profiles" / "work"
    other.mkdir(parents=True)
    conn = sqlite3.connect(other / "state.db")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("CREATE TABLE t(x)")
    conn.executemany("INSERT INTO t VALUES (?)", [("row %d" % i * 50,) for i in range(3000)])
    conn.commit()
    conn.close()
    r = run_job("--profile-dir", profile, "--profile-dir", other, "--keep", "1")
    assert r.returncode == 0, r.stderr
    [b1] = backups_in(profile / "fleetops" / "backups")
    [b2] = backups_in(other / "fleetops" / "backups")
    assert manifest_of(b2)["profile"] == "work" and manifest_of(b1)["profile"] == "default"
    assert manifest_of(b2)["source_journal_mode"] == "delete"
    assert integrity(b2) == ["ok"]
    assert "checkpoint" not in (other / "fleetops" / "logs" / "backup.log").read_text()


def test_one_failing_profile_does_not_stop_the_others(profile, tmp_path):
    r = run_job("--profile-dir", tmp_path / "missing", "--profile-dir", profile)
    assert r.returncode == hb.RC_BAD_INPUT
    assert len(backups_in(profile / "fleetops" / "backups")) == 1


def test_payload_entry_and_status(profile):
    res = hb.main({"profile_dirs": [str(profile)], "keep": 2, "_check": True})
    assert res["skipped"] and not res["changed"] and not (profile / "fleetops").exists()
    res = hb.main({"profile_dirs": [str(profile)], "keep": 2})
    assert res["changed"] and not res["failed"] and res["verified"] == 1, res["msg"]
    st = hb.main({"action": "status", "profile_dirs": [str(profile)]})
    assert st["verified"] == 1 and st["profiles"][0]["newest"]["sha256"] == res["results"][0]["manifest"]["sha256"]
    # a backup whose bytes changed after it was verified is no longer "verified"
    path = res["results"][0]["manifest"]["path"]
    with open(path, "r+b") as f:
        f.seek(5000)
        f.write(b"\xff")
    st = hb.main({"action": "status", "profile_dirs": [str(profile)]})
    assert st["verified"] == 0 and "sha256" in st["msg"]


def test_job_version_is_the_package_version():
    """The manifest's fleetops_version must name the release that installed the job."""
    import fleetops
    assert hb.VERSION == fleetops.__version__


def test_a_name_retention_removed_is_never_given_to_a_newer_backup(tmp_path):
    """Several runs in one second: state-X.db was pruned, state-X-1.db (the newest) stays; the
    next backup is state-X-2, never a second, different state-X.db."""
    import datetime
    from fleetops.remote.hermes import backup as hb
    now = datetime.datetime(2026, 12, 1, 10, 0, 0, tzinfo=datetime.timezone.utc)
    assert hb.unique_names(str(tmp_path), now) == "state-20261201T100000Z"
    for ext in (".db", ".json"):
        (tmp_path / f"state-20261201T100000Z-1{ext}").write_bytes(b"")
        (tmp_path / f"state-20261201T095959Z{ext}").write_bytes(b"")
    assert hb.unique_names(str(tmp_path), now) == "state-20261201T100000Z-2"
