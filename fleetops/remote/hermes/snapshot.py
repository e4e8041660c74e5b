"""hermes_snapshot: a consistent copy of one profile's state.db, taken while Hermes still runs.

Why the backup API: it copies the database as one read transaction, so a gateway writing
into the WAL meanwhile neither blocks nor tears the copy (field report 01: the backup taken
under the running gateway is what made the rebuild possible); `cp state.db` would miss the
WAL. Why the free-space check first: every later repair step (quarantine copy, new file)
needs room, and finding out after the writers are stopped leaves the host down.

Stdlib only, Python 3.8+; `main(args)` is the payload entry point.
"""
import os
import sqlite3
import time

from fleetops.remote.host.inputs import flag, number
from fleetops.remote.hermes import paths as hermes_paths
from fleetops.remote.hermes import steplib
from fleetops.remote.host.durable import fsync_dir, fsync_file

DEFAULT_MIN_FREE_FACTOR = 3.0   # snapshot + quarantine copy + repaired file, each up to the image size
FREE_MARGIN = 1 << 20           # and a little slack for journals and manifests


def image_size(db):
    return sum(os.path.getsize(db + s) for s in steplib.SIDECARS if os.path.exists(db + s))


def free_bytes(path):
    """Free bytes for an unprivileged writer on the filesystem holding path (or its nearest parent)."""
    p = os.path.abspath(path)
    while not os.path.exists(p):
        p = os.path.dirname(p)
    st = os.statvfs(p)
    return st.f_bavail * st.f_frsize, os.stat(p).st_dev


def space_check(loc, factor, dest=None):
    """None when there is room for the whole repair, else the refusal text (nothing done yet)."""
    size = image_size(loc["db"])
    needs = {}
    fo_free, fo_dev = free_bytes(dest or loc["fleetops"])
    needs[fo_dev] = [fo_free, int(size * factor) + FREE_MARGIN, dest or loc["fleetops"]]
    db_free, db_dev = free_bytes(loc["home"])
    if db_dev != fo_dev:  # the new file is staged beside state.db before the rename
        needs[db_dev] = [db_free, size + FREE_MARGIN, loc["home"]]
    for free, need, where in needs.values():
        if free < need:
            return ("not enough free space on the filesystem of %s: %d bytes free, %d needed "
                    "(%.1fx the %d-byte image + margin, for snapshot, quarantine copy and repaired file). "
                    "Free some space (or move old ~/.hermes/fleetops/snapshots elsewhere) and re-run; "
                    "nothing was stopped or changed." % (where, free, need, factor, size)), free, need
    return None, fo_free, needs[fo_dev][1]


def permission_refusal(loc):
    """None, or the refusal when this user cannot read and write the image: checked by the first
    step that acts (the snapshot, before any writer is stopped), since every later step needs it."""
    denied = hermes_paths.access_problem(loc["db"], write=True)
    if not denied:
        return None
    return {"changed": False, "failed": True, "skipped": False, "refused": True, "reason": "permission",
            "msg": "permission denied: %s -- fix its ownership/permissions, then re-run; nothing was "
                   "stopped or changed" % denied}


# ---------------------------------------------------------------- the snapshot

def idle_wal_image(db):
    """A WAL-mode state.db with no -wal and no -shm beside it: nothing has it open (SQLite keeps
    both files while any connection does), so the image is the main file alone."""
    if os.path.exists(db + "-wal") or os.path.exists(db + "-shm"):
        return False
    try:
        with open(db, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    return len(head) == 20 and head[:16] == b"SQLite format 3\x00" and head[18] == 2 and head[19] == 2


def file_stamp(db):
    """What changes when anything writes the main file, or opens it in WAL mode."""
    st = os.stat(db)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, os.path.exists(db + "-wal"),
            os.path.exists(db + "-shm"))


def _open_source(db, immutable=False):
    """Read-only first; a WAL file with no -shm yet needs a normal open (as every Hermes CLI does).

    immutable (an idle WAL image, see idle_wal_image): read without locks, so SQLite creates no
    -wal/-shm beside a state.db that had none; the caller checks file_stamp() afterwards and
    reads again the locking way if anything touched the file meanwhile."""
    if immutable:
        conn = sqlite3.connect("file:%s?mode=ro&immutable=1" % steplib.uri_path(db), uri=True, timeout=30.0)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn, "immutable"
        except sqlite3.Error:
            conn.close()
    uri = "file:%s?mode=ro" % steplib.uri_path(db)
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=30.0)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn, "ro"
    except sqlite3.Error:
        try:
            conn.close()
        except Exception:
            pass
    conn = sqlite3.connect(db, timeout=30.0)
    conn.execute("PRAGMA query_only=1")
    return conn, "rw-query-only"


def _copy(db, out, immutable):
    """Online backup of db into out (replacing what is there); (open_mode, quick_check, pages, page size)."""
    src, mode = _open_source(db, immutable)
    try:
        dst = sqlite3.connect(out)
        try:
            src.backup(dst)  # pages=-1: one step, one read transaction on the source
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file, no sidecars
            qc = steplib.quick_check(dst)
            page_count = dst.execute("PRAGMA page_count").fetchone()[0]
            page_size = dst.execute("PRAGMA page_size").fetchone()[0]
        finally:
            dst.close()
    finally:
        src.close()
    return mode, qc, page_count, page_size


def snapshot(loc, dest_root=None, label=None, now=None):
    """Take the snapshot; returns (dir, manifest). Raises sqlite3.Error/OSError on failure (dir kept)."""
    started = time.time()
    base = dest_root or os.path.join(loc["fleetops"], "snapshots")
    steplib.makedirs_private(base)
    name = steplib.stamp_dir_name(loc["profile"], now) + ("-" + label if label else "")
    d = os.path.join(base, name)
    os.mkdir(d, 0o700)
    out = os.path.join(d, "state.db")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    idle = idle_wal_image(loc["db"])
    stamp = file_stamp(loc["db"]) if idle else None
    mode, qc, page_count, page_size = _copy(loc["db"], out, immutable=idle)
    if idle and file_stamp(loc["db"]) != stamp:
        # something opened or wrote it while it was read without locks: read it again, locking
        mode, qc, page_count, page_size = _copy(loc["db"], out, immutable=False)
        mode += " (the lock-free read was redone: state.db changed meanwhile)"
    os.chmod(out, 0o600)
    fsync_file(out)
    rec = steplib.file_record(out)
    manifest = {
        "kind": "fleetops-snapshot", "version": 1, "created_at": steplib.iso(now), "profile": loc["profile"],
        "source": {"db": loc["db"], "open_mode": mode,
                   "sizes": {s or "db": os.path.getsize(loc["db"] + s) for s in steplib.SIDECARS
                             if os.path.exists(loc["db"] + s)}},
        "files": {"state.db": {"size": rec["size"], "sha256": rec["sha256"]}},
        "page_count": page_count, "page_size": page_size,
        "quick_check": qc, "verified": qc["ok"], "sqlite_version": sqlite3.sqlite_version,
        "elapsed_s": round(time.time() - started, 3),
    }
    steplib.write_json(os.path.join(d, "manifest.json"), manifest)
    fsync_dir(base)
    return d, manifest


def main(args):
    """Payload: {hermes_home?, profile?, min_free_factor?, dest?, label?, run_id?, _check?}."""
    args = args or {}
    try:
        loc = steplib.locate(args)
    except ValueError as exc:
        return {"changed": False, "failed": True, "skipped": False, "msg": str(exc)}
    if not os.path.isfile(loc["db"]):
        return {"changed": False, "failed": True, "skipped": False, "db": loc["db"],
                "msg": "no state.db at %s: nothing to snapshot" % loc["db"]}
    refusal = permission_refusal(loc)
    if refusal:
        return refusal
    factor = number(args.get("min_free_factor"), DEFAULT_MIN_FREE_FACTOR)
    refusal, free, need = space_check(loc, factor, args.get("dest"))
    if refusal:
        return {"changed": False, "failed": True, "skipped": False, "refused": True,
                "reason": "free_space", "free_bytes": free, "needed_bytes": need, "msg": refusal}
    if flag(args.get("_check")):
        return {"changed": False, "failed": False, "skipped": False, "free_bytes": free,
                "needed_bytes": need,
                "msg": "check mode: would snapshot %s (%d bytes) into %s" % (
                    loc["db"], image_size(loc["db"]),
                    args.get("dest") or os.path.join(loc["fleetops"], "snapshots"))}
    lk, refused = steplib.lock_or_refusal(loc, args, "hermes_snapshot")
    if refused:
        return refused
    steplib.exit_with_connection()
    try:
        leftovers = [] if args.get("dest") else steplib.set_aside_incomplete(
            os.path.join(loc["fleetops"], "snapshots"), "manifest.json")
        d, man = snapshot(loc, args.get("dest"), args.get("label"))
    except (sqlite3.Error, OSError) as exc:
        return {"changed": True, "failed": True, "skipped": False,
                "msg": "snapshot of %s failed: %s: %s (the next snapshot sets the partial directory aside "
                       "as *.incomplete; the quarantine step still copies the raw image once writers "
                       "are stopped)"
                       % (loc["db"], type(exc).__name__, exc)}
    finally:
        lk.release()
    msg = "snapshot %s: %d pages, sha256 %s, quick_check %s" % (
        d, man["page_count"], man["files"]["state.db"]["sha256"][:12],
        "ok" if man["quick_check"]["ok"] else "%s errors" % man["quick_check"]["errors"])
    if leftovers:
        msg += "; " + "; ".join(leftovers)
    return {"changed": True, "failed": False, "skipped": False, "msg": msg, "snapshot_dir": d,
            "manifest": man, "free_bytes": free, "needed_bytes": need, "leftovers": leftovers}
