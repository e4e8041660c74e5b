"""The persistence evidence reader on real files: log lines quoted verbatim from the field reports,
fallback files named as Hermes names them, and the write probe on a real store.

Where a quote lacks the record's first line (the report shows only the traceback), the test
adds one and says so. Log times are the host's local time: the Kolkata case fakes the zone.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from fleetops.remote.hermes import audit as hermes_audit
from fleetops.remote.hermes import audit_backups
from fleetops.remote.hermes import persistence as hp
from tests.corpus import build

# field report 02 (Hermes v0.21.1), quoted as the post shows them
ROUTING = ("2026-09-07 17:05:28 WARNING gateway.session:\n"
           "  state.db routing save failed: database disk image is malformed\n")
SUPERVISED = ("2026-09-07 21:03:05 ERROR gateway.run:\n"
              "  Supervised task hosted_room_worker died:\n"
              "  DatabaseError('database disk image is malformed')\n")
# the report quotes the traceback only; the first line of its record is ours
FTS_PROBE = ("2026-09-07 21:04:11 ERROR hermes_state: FTS probe failed\n"
             'File "hermes_state_schema.py", line 390, in _fts_table_probe\n'
             "sqlite3.OperationalError: disk I/O error\n")
REPAIR_SKIPPED = ("2026-09-07 21:10:40 ERROR hermes_state: state.db repair skipped: a live writer still holds\n"
                  "state.db; skipped schema surgery to avoid tearing b-tree pages under a\n"
                  "concurrent writer. Stop the gateway (hermes gateway stop) and retry.\n")
# HERMES-FACTS: SQLite 3.50+ FTS5 wording; field report 03: the retired-WAL refusal
FTS_NEW = '2026-09-07 21:05:00 WARNING hermes_state: fts5: corruption found reading blob 4 from table "messages_fts"\n'
RETIRED = ("2026-09-07 21:06:00 WARNING gateway.session: another Hermes process still holds an old copy of "
           "the session database's write-ahead log, so Hermes stopped writing to keep the file safe …\n")
# hermes-agent 0.19.0's own line, captured in the lab (tests/lab/audit/test_persistence.py)
FALLBACK = "2026-09-07 21:07:00,150 WARNING gateway.run: SQLite session store not available: file is not a database\n"


@pytest.fixture
def kolkata():
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


def _home(tmp_path, errors="", gateway="", agent=""):
    home = tmp_path / "hermes"
    (home / "logs").mkdir(parents=True)
    for name, text in (("errors.log", errors), ("gateway.log", gateway), ("agent.log", agent)):
        (home / "logs" / name).write_text(text, encoding="utf-8")
    return home


def _ts(local):
    return time.mktime(time.strptime(local, "%Y-%m-%d %H:%M:%S"))


def test_field_lines_counted_by_kind_once_across_logs_in_utc(tmp_path, kolkata):
    text = ROUTING + SUPERVISED + FTS_PROBE + FTS_NEW + RETIRED + REPAIR_SKIPPED
    home = _home(tmp_path, errors=text, agent=text + FALLBACK, gateway=ROUTING + SUPERVISED + FALLBACK)
    now = _ts("2026-09-07 21:30:00")
    logs = hp.read_logs(str(home), since=now - 7 * 86400, now=now, tail_bytes=1 << 20)
    k = logs["kinds"]
    assert {n: v["count"] for n, v in k.items()} == {
        "malformed": 2, "disk_io": 1, "fts_corruption": 1, "retired_wal": 1, "repair_skipped": 1,
        "store_unavailable": 1}
    # Kolkata is 5:30 ahead of UTC
    assert (k["malformed"]["first"], k["malformed"]["last"]) == ("2026-09-07T11:35:28Z", "2026-09-07T15:33:05Z")
    assert k["malformed"]["last_hour"] == 1
    assert k["malformed"]["sample"].startswith("2026-09-07 21:03:05 ERROR gateway.run:")
    assert set(k["malformed"]["files"]) == {"errors.log", "agent.log", "gateway.log"}


def test_tail_is_bounded_and_old_lines_ignored(tmp_path):
    filler = "".join("2026-09-07 10:00:%02d,000 INFO gateway.run: housekeeping tick %d\n" % (i % 60, i)
                     for i in range(20000))
    home = _home(tmp_path, errors=ROUTING + filler + SUPERVISED)
    now = _ts("2026-09-07 21:30:00")
    logs = hp.read_logs(str(home), since=now - 86400, now=now, tail_bytes=64 * 1024)
    assert logs["files"]["errors.log"]["truncated"] is True
    assert logs["files"]["errors.log"]["read_bytes"] <= 64 * 1024
    assert logs["kinds"]["malformed"]["count"] == 1  # the 17:05 line is beyond the tail
    logs = hp.read_logs(str(home), since=_ts("2026-09-07 21:00:00"), now=now, tail_bytes=1 << 22)
    assert logs["kinds"]["malformed"]["count"] == 1  # the 17:05 line is older than `since`


def _evidence(home, db, now, gateway=None, newest=None):
    ev = {"filesystem": hp.filesystem(str(db)), "newest_message": {"timestamp": newest}}
    ev["last_write"] = hp.last_write(str(db), newest)
    ev["logs"] = hp.read_logs(str(home), now - 7 * 86400, now, 1 << 20)
    ev["fallback"] = hp.fallback_files(str(home), ev["last_write"]["at_ts"], now - 7 * 86400)
    ev["repair_attempts"] = hp.repair_attempts(str(db))
    ev["gateway"] = gateway
    return ev, hp.judge(ev, now, 6)


def _set_mtime(path, t):
    os.utime(path, (t, t))


def test_errors_after_the_last_write_mean_not_persisting(tmp_path, kolkata):
    home = _home(tmp_path, errors=ROUTING + SUPERVISED)
    db = home / "state.db"
    db.write_bytes(b"x")
    _set_mtime(db, _ts("2026-09-07 17:00:00"))
    now = _ts("2026-09-07 21:30:00")
    ev, (reasons, warns) = _evidence(home, db, now)
    assert reasons and "2 write error(s) logged after the store's last write" in reasons[0], reasons
    assert ev["errors_after_last_write"] == {"malformed": 2}
    assert [w["code"] for w in warns if w["code"] == "write_errors"] == ["write_errors"]
    # the store took a write after the errors: repaired and writing, flagged only for the last hour
    _set_mtime(db, _ts("2026-09-07 21:20:00"))
    ev, (reasons, warns) = _evidence(home, db, now)
    assert reasons == []
    assert next(w["msg"] for w in warns if w["code"] == "write_errors") == (
        "1 write error(s) in the last hour: malformed 1 (2 since 2026-09-07T11:35:28Z, last 2026-09-07T15:33:05Z)")
    # a day later: nothing in the last hour, nothing after the last write
    ev, (reasons, warns) = _evidence(home, db, now + 86400)
    assert reasons == [] and not [w for w in warns if w["code"] == "write_errors"]


def test_jsonl_and_pending_messages_newer_than_the_store(tmp_path):
    home = _home(tmp_path)
    db = home / "state.db"
    db.write_bytes(b"x")
    now = time.time()
    _set_mtime(db, now - 3600)
    (home / "sessions").mkdir()
    (home / "sessions" / "sessions.json").write_text("{}")            # the routing mirror: never counted
    old = home / "sessions" / "20260907_090008_a1b2.jsonl"
    old.write_text('{"role": "user"}\n')
    _set_mtime(old, now - 7200)
    ev, (reasons, _w) = _evidence(home, db, now, newest=now - 3700)
    assert reasons == [] and ev["fallback"]["sessions_jsonl"] == dict(
        ev["fallback"]["sessions_jsonl"], total=1, newer=0)
    new = home / "sessions" / "20260907_101500_c3d4.jsonl"
    new.write_text('{"role": "user"}\n')
    (home / "pending_messages").mkdir(mode=0o700)
    (home / "pending_messages" / ("pending-%s.json" % ("ab" * 16))).write_text("{}")  # 0.20.1's flush file
    ev, (reasons, _w) = _evidence(home, db, now, newest=now - 3700)
    assert ev["fallback"]["sessions_jsonl"]["newer"] == 1 and ev["fallback"]["pending_messages"]["newer"] == 1
    assert any("sessions/*.jsonl" in r for r in reasons) and any("pending_messages/" in r for r in reasons)


def test_store_unavailable_counts_only_for_the_gateway_that_logged_it(tmp_path):
    home = _home(tmp_path, gateway=FALLBACK)
    db = home / "state.db"
    db.write_bytes(b"x")
    now = _ts("2026-09-07 23:00:00")
    _set_mtime(db, now - 60)  # restored after the fallback: newer than the line
    gw = {"pid": 4242, "started_ts": _ts("2026-09-07 21:06:58"), "uptime_s": now - _ts("2026-09-07 21:06:58"),
          "holds_store": True}
    _ev, (reasons, _w) = _evidence(home, db, now, gateway=gw)
    assert len(reasons) == 1 and reasons[0].startswith("gateway PID 4242 (up 113 min) logged"), reasons
    restarted = dict(gw, started_ts=_ts("2026-09-07 22:00:00"))
    _ev, (reasons, _w) = _evidence(home, db, now, gateway=restarted)
    assert reasons == []


def test_bookkeeping_repair_attempts_and_retired_wal_captures(tmp_path):
    home = _home(tmp_path)
    db = home / "state.db"
    db.write_bytes(b"x")
    # field report 01: "recorded to state.db.repair-attempts.json with failed_attempts=1"
    (home / "state.db.repair-attempts.json").write_text(json.dumps({"failed_attempts": 1, "attempts": [{}]}))
    ra = hp.repair_attempts(str(db))
    assert ra["failed_attempts"] == 1 and ra["fields"] == {"failed_attempts": 1, "attempts": "1 item(s)"}
    _ev, (_r, warns) = _evidence(home, db, time.time())
    assert any(w["code"] == "hermes_repair_failed" and "failed_attempts=1" in w["msg"] for w in warns)
    # the manifest's fields as HERMES-FACTS lists them (upstream writes it; no released venv here does)
    cap = home / "state.db.retired-wal-20260920-101500-41230"
    cap.mkdir()
    (cap / "manifest.json").write_text(json.dumps({
        "version": 1, "database": str(db), "trigger": "deleted_wal_generation", "pid": 41230,
        "captured_at": "2026-09-20T10:15:00Z", "python": "3.11.9", "sqlite": "3.45.1",
        "wal": {"identity": [2049, 1234], "file": "state.db-wal", "bytes": 4120032, "sha256": "ab" * 32},
        "shm": {"identity": [2049, 1235], "file": "state.db-shm", "bytes": 32768, "sha256": "cd" * 32},
        "path_generation_at_capture": 3,
        "main": {"identity": [2049, 1200], "size": 75 << 20, "mode": "copied", "file": "state.db",
                 "bytes": 75 << 20, "sha256": "ef" * 32,
                 "header": {"page_size": 4096, "change_counter": 911, "page_count": 19200,
                            "user_version": 0, "application_id": 0}}}))
    (home / "state.db.retired-wal-20260921-080000-777.partial").mkdir()
    b = audit_backups.backups(str(home), str(db), "default", str(home), time.time())
    caps = {os.path.basename(c["path"]): c for c in b["retired_wal_captures"]}
    c = caps["state.db.retired-wal-20260920-101500-41230"]
    assert (c["trigger"], c["pid"], c["captured_at"], c["wal"]["bytes"], c["main"]["mode"],
            c["main"]["header"]["change_counter"]) == ("deleted_wal_generation", 41230, "2026-09-20T10:15:00Z",
                                                       4120032, "copied", 911)
    assert caps["state.db.retired-wal-20260921-080000-777.partial"] == dict(
        path=str(home / "state.db.retired-wal-20260921-080000-777.partial"), partial=True, manifest=False)


MOUNTINFO = """\
22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw
30 22 0:40 / /srv/hermes rw,relatime shared:9 - nfs4 nas:/export/hermes rw,vers=4.2
31 30 0:41 / /srv/hermes/fast rw shared:10 - xfs /dev/vdb1 rw
32 22 0:42 / /home/ann/my\\040share rw - fuse.sshfs ann@box:/data rw,user_id=1000
33 22 0:43 / /mnt/vm rw - virtiofs hostshare rw
34 22 0:44 / /var/lib/zfs rw - zfs tank/hermes rw,xattr
"""


@pytest.mark.parametrize("path,fstype,unsafe", [
    ("/home/ann/.hermes/state.db", "ext4", False),
    ("/srv/hermes/.hermes/state.db", "nfs4", True),
    ("/srv/hermes/fast/.hermes/state.db", "xfs", False),       # the longest mount point wins
    ("/home/ann/my share/.hermes/state.db", "fuse.sshfs", True),
    ("/mnt/vm/.hermes/state.db", "virtiofs", True),
    ("/var/lib/zfs/.hermes/state.db", "zfs", False),
])
def test_filesystem_longest_mount_point(tmp_path, path, fstype, unsafe):
    mi = tmp_path / "mountinfo"
    mi.write_text(MOUNTINFO)
    fs = hp.filesystem(path, mountinfo=str(mi))
    assert (fs["fstype"], fs["wal_unsafe"]) == (fstype, unsafe), fs


def test_disk_io_error_on_a_local_filesystem_says_the_hint_does_not_apply(tmp_path):
    home = _home(tmp_path, errors=FTS_PROBE)
    db = home / "state.db"
    db.write_bytes(b"x")
    _ev, (_r, warns) = _evidence(home, db, _ts("2026-09-07 21:30:00"))
    fs = hp.filesystem(str(db))
    if fs["wal_unsafe"] is not False:
        pytest.fail(f"this test needs its tmp dir on a local filesystem, found {fs}")
    assert any(w["code"] == "disk_io_local_fs" and fs["fstype"] in w["msg"] for w in warns), warns


# --- the write probe ---------------------------------------------------------------------------

def _image(src, tmp_path):
    db = tmp_path / "state.db"
    build.copy_image(src, db)
    return db


def _rows(db):
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [c.execute(f"SELECT count(*) FROM {t} NOT INDEXED").fetchone()[0]
                for t in ("messages", "sessions", "state_meta")]
    finally:
        c.close()


def _audit(db, **opts):
    return hermes_audit.main(dict({"db_path": str(db), "services": False, "tooling": False}, **opts))["databases"][0]


def test_write_probe_off_by_default_and_ok_on_a_healthy_idle_store(std_src, tmp_path):
    db = _image(std_src, tmp_path)
    before = _rows(db)
    assert "write_probe" not in (_audit(db)["persistence"] or {})
    rec = _audit(db, write_probe=True)
    wp = rec["persistence"]["write_probe"]
    assert wp["done"] and wp["ok"], wp
    assert rec["verdict"] == "healthy" and _rows(db) == before


HOLD_PY = r"""
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute(sys.argv[2])
print("ready", flush=True)
time.sleep(120)
"""


def _holder(db, sql):
    p = subprocess.Popen([sys.executable, "-c", HOLD_PY, str(db), sql], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p


def test_write_probe_refused_for_delete_journal_under_a_writer_and_in_check_mode(std_src, tmp_path):
    db = _image(std_src, tmp_path)
    c = sqlite3.connect(db)
    c.execute("PRAGMA journal_mode=DELETE")
    c.close()
    p = _holder(db, "SELECT count(*) FROM sessions")
    try:
        wp = _audit(db, write_probe=True)["persistence"]["write_probe"]
        assert wp["done"] is False and f"PID {p.pid}" in wp["refused"] and "journal mode rollback" in wp["refused"]
    finally:
        p.kill()
        p.wait()
    wp = _audit(db, write_probe=True, _check=True)["persistence"]["write_probe"]
    assert wp == {"done": False, "refused": "check mode: the write probe writes"}


def test_write_probe_refused_on_a_damaged_store(std_src, tmp_path):
    from tests.corpus import damage
    d = damage.make("interior_page_zeroed", std_src, tmp_path / "d" / "state.db")
    wp = _audit(d.path, write_probe=True)["persistence"]["write_probe"]
    assert wp["done"] is False and "structural_corruption" in wp["refused"], wp


def test_write_probe_that_cannot_write_is_not_persisting(std_src, tmp_path):
    """A process stuck inside a write transaction: Hermes' writes fail, and so does the probe."""
    db = _image(std_src, tmp_path)
    p = _holder(db, "BEGIN IMMEDIATE")
    try:
        rec = _audit(db, write_probe=True)
    finally:
        p.kill()
        p.wait()
    wp = rec["persistence"]["write_probe"]
    assert wp["done"] and not wp["ok"] and "database is locked" in wp["error"], wp
    assert rec["verdict"] == "not_persisting" and rec["persistence"]["persisting"] == "no"
    assert any(r.startswith("write probe failed: OperationalError: database is locked") for r in rec["reasons"])


def test_retired_wal_captures_are_a_warning_naming_the_newest(std_src, tmp_path):
    db = _image(std_src, tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()  # a PID that no longer runs
    cap = tmp_path / ("state.db.retired-wal-20260920-101500-%d" % gone.pid)
    cap.mkdir()
    (cap / "manifest.json").write_text(json.dumps({"version": 1, "trigger": "deleted_wal_generation",
                                                   "pid": gone.pid, "captured_at": "2026-09-20T10:15:00Z"}))
    rec = _audit(db)
    w = [x["msg"] for x in rec["warnings"] if x["code"] == "retired_wal_captures"]
    assert w == ["1 retired-WAL capture(s) beside state.db, newest %s (trigger deleted_wal_generation, "
                 "captured_at 2026-09-20T10:15:00Z, pid %d): keep them" % (cap.name, gone.pid)], w
    assert rec["verdict"] == "healthy"


def test_gateway_up_for_hours_while_nothing_reached_the_store(tmp_path):
    home = _home(tmp_path)
    db = home / "state.db"
    db.write_bytes(b"x")
    now = time.time()
    gw = {"pid": 4242, "started_ts": now - 8 * 3600, "uptime_s": 8 * 3600.0, "holds_store": False}
    _ev, (reasons, warns) = _evidence(home, db, now, gateway=gw, newest=now - 9 * 3600)
    codes = {w["code"]: w["msg"] for w in warns}
    assert reasons == []  # idle or losing: a finding to look at, not proof
    assert "has run 8.0 h and no message reached the store since it started" in codes["no_message_since_gateway_start"]
    assert codes["gateway_without_store"] == "gateway PID 4242 has run 8.0 h without state.db open"
    _ev, (_r, warns) = _evidence(home, db, now, gateway=dict(gw, holds_store=True), newest=now - 60)
    assert not {w["code"] for w in warns} & {"no_message_since_gateway_start", "gateway_without_store"}
