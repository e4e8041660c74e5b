"""hermes_snapshot: a consistent copy of one profile's state.db, taken while Hermes still runs.

Why the backup API: it copies the database as one read transaction, so a gateway writing
into the WAL meanwhile neither blocks nor tears the copy (field report 01: the backup taken
under the running gateway is what made the rebuild possible); `cp state.db` would miss the
WAL. Why the free-space check first: every later repair step (quarantine copy, new file)
needs room, and finding out after the writers are stopped leaves the host down.

This file also holds the small filesystem helpers the other repair payloads share (where
fleetops keeps things under ~/.hermes/fleetops, 0600/0700 modes, fsync, sha256, manifests).
Stdlib only, Python 3.8+; `main(args)` is the payload entry point.
"""
import datetime
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import time

from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import paths as hermes_paths
from fleetops.remote.host import hostlock
from fleetops.remote.host.durable import fsync_dir, fsync_file, sha256_file  # noqa: F401 (used from here too)

SIDECARS = ("", "-wal", "-shm")
DEFAULT_MIN_FREE_FACTOR = 3.0   # snapshot + quarantine copy + repaired file, each up to the image size
FREE_MARGIN = 1 << 20           # and a little slack for journals and manifests
QUICK_CHECK_MAX = 1000000


# ---------------------------------------------------------------- shared helpers

def utc_ts(now=None):
    """UTC timestamp used for directory names (sortable, no colons)."""
    dt = datetime.datetime.utcfromtimestamp(time.time() if now is None else now)
    return dt.strftime("%Y%m%dT%H%M%S.%fZ")


def iso(now=None):
    return datetime.datetime.utcfromtimestamp(time.time() if now is None else now).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


def truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y")
    return bool(value)


def num(value, default, cast=float):
    if value is None or value == "":
        return default
    try:
        return cast(value)
    except (TypeError, ValueError):
        return default


def locate(args):
    """{root, profile, home, db, fleetops}: the profile is named, never taken from active_profile."""
    args = args or {}
    root = args.get("hermes_home")
    root = os.path.abspath(os.path.expanduser(root)) if root else hermes_paths.default_root()
    profile = args.get("profile") or hermes_paths.DEFAULT_PROFILE
    if not hermes_paths.PROFILE_RE.match(profile):
        raise ValueError("invalid profile name %r (Hermes names are [a-z0-9][a-z0-9_-]{0,63})" % profile)
    home = hermes_paths.profile_home(root, profile)
    policy = args.get("holder_scan") or "strict"
    if policy not in hermes_holders.POLICIES:
        raise ValueError("holder_scan must be one of %s, not %r" % ("/".join(hermes_holders.POLICIES), policy))
    db = os.path.join(home, hermes_paths.DB_NAME)
    if not args.get("allow_symlink"):
        refuse_outside_links(root, [home, db, db + "-wal", db + "-shm"])
    return {"root": root, "profile": profile, "home": home, "db": db,
            "fleetops": os.path.join(root, "fleetops"), "holder_scan": policy}


def refuse_outside_links(root, paths):
    """A state.db (or sidecar, or profile dir) that is a symlink out of the Hermes home would
    have the repair move, swap and chmod files somewhere nobody meant: refuse unless told."""
    top = os.path.realpath(root)
    for path in paths:
        if os.path.islink(path):
            target = os.path.realpath(path)
            if target != top and not target.startswith(top + os.sep):
                raise ValueError("%s is a symlink to %s, outside the Hermes home %s; refusing to operate "
                                 "on it (allow_symlink: true to accept it)" % (path, target, top))


def stamp_dir_name(profile, now=None):
    """`<UTC ts>` for the default profile, `<UTC ts>-<profile>` for a named one."""
    ts = utc_ts(now)
    return ts if profile == hermes_paths.DEFAULT_PROFILE else "%s-%s" % (ts, profile)


def makedirs_private(path):
    """mkdir -p with 0700 on every directory we create (they hold conversation data)."""
    path = os.path.abspath(path)
    missing = []
    p = path
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
        os.chmod(d, 0o700)
        fsync_dir(os.path.dirname(d))
    return path


def write_json(path, data):
    """Atomic, fsynced, 0600: a crash leaves the old file or the new one, never half of either."""
    tmp = "%s.tmp-%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True, default=repr)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, 0o600)
    os.rename(tmp, path)
    fsync_dir(os.path.dirname(path) or ".")


def read_json(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def file_record(path, sha=True):
    """size, sha256, mode, owner, inode of one file (None if absent)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    rec = {"size": st.st_size, "mode": "%04o" % (st.st_mode & 0o7777), "uid": st.st_uid,
           "gid": st.st_gid, "dev": st.st_dev, "ino": st.st_ino, "mtime": st.st_mtime}
    if sha:
        rec["sha256"] = sha256_file(path)
    return rec


def copy_private(src, dst):
    """Copy src to dst (created 0600, fsynced); returns the sha256 of the bytes written."""
    h = hashlib.sha256()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(src, "rb") as fin, os.fdopen(fd, "wb") as fout:
        while True:
            b = fin.read(1 << 20)
            if not b:
                break
            h.update(b)
            fout.write(b)
        fout.flush()
        os.fsync(fout.fileno())
    return h.hexdigest()


def uri_path(path):
    """A filesystem path quoted for an SQLite `file:` URI."""
    try:
        from urllib.parse import quote
    except ImportError:  # pragma: no cover
        from urllib import quote
    return quote(os.path.abspath(path))


def image_size(db):
    return sum(os.path.getsize(db + s) for s in SIDECARS if os.path.exists(db + s))


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


def quick_check(conn, limit=QUICK_CHECK_MAX):
    """{"ok": bool, "errors": n, "first": [...]} from PRAGMA quick_check(N); an exception counts as damage."""
    try:
        lines = [r[0] for r in conn.execute("PRAGMA quick_check(%d)" % int(limit))]
    except sqlite3.Error as exc:
        return {"ok": False, "errors": None, "first": ["%s: %s" % (type(exc).__name__, exc)]}
    if lines == ["ok"]:
        return {"ok": True, "errors": 0, "first": []}
    return {"ok": False, "errors": len(lines), "first": lines[:10]}


def lock_or_refusal(loc, args, what):
    """Take the host lock for this payload; returns (lock, None) or (None, refusal result)."""
    try:
        lk = hostlock.acquire(os.path.join(loc["fleetops"], "lock"), run_id=args.get("run_id"),
                              ttl=num(args.get("lock_ttl"), hostlock.DEFAULT_TTL), purpose=what,
                              wait=num(args.get("lock_wait"), 0.0))
    except hostlock.Locked as exc:
        return None, {"changed": False, "failed": True, "skipped": False, "refused": True,
                      "msg": str(exc), "lock_holder": exc.holder}
    return lk, None


_watching = []


def exit_with_connection(interval=0.5):
    """Exit this payload at once when the connection that started it is gone.

    Why: sshd runs payloads without a terminal, so a dropped connection (or a SIGKILLed
    controller) sends them no SIGHUP. An orphaned snapshot or salvage would keep writing a
    result nobody collects and hold the host lock, refusing the next run, for minutes. What
    those steps write is scratch (a new snapshot or work directory, which the next run sets
    aside), so stopping mid-write loses nothing; the kernel drops the lock with the process.
    Gone means: stderr (the channel's pipe) lost its reader, or the parent (sshd's session
    process) died. Armed when stderr is a pipe or socket (also under become: sudo allocates a
    pty for use_pty only when it runs in a terminal, which an exec channel is not, so stderr
    stays the channel's pipe), or a terminal, whose hang-up counts too; once per process.
    """
    import select  # here, not at the top: most payloads never arm it
    import threading
    try:
        mode = os.fstat(2).st_mode
        poller = select.poll()
    except (OSError, AttributeError):
        return False
    if _watching or not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(2)):
        return bool(_watching)
    parent = os.getppid()
    poller.register(2, 0)  # no events asked: poll reports only POLLERR / POLLHUP

    def watch():
        while True:
            if poller.poll(interval * 1000) or os.getppid() != parent:
                os._exit(75)

    t = threading.Thread(target=watch, name="exit-with-connection")
    t.daemon = True
    t.start()
    _watching.append(t)
    return True


def set_aside_incomplete(parent, marker):
    """Rename each directory in `parent` that lacks its `marker` file to NAME.incomplete; notes.

    Why: a snapshot or repair cut off mid-write (connection dropped, payload killed) leaves a
    directory without its manifest or report. Renamed, nobody takes it for a good one; nothing
    in it is deleted. Call with the host lock held: then no live payload is writing there.
    """
    notes = []
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return notes
    for name in names:
        d = os.path.join(parent, name)
        if ".incomplete" in name or os.path.islink(d) or not os.path.isdir(d) \
                or os.path.exists(os.path.join(d, marker)):
            continue
        dst = d + ".incomplete"
        if os.path.lexists(dst):
            dst = "%s.incomplete-%s" % (d, utc_ts())
        os.rename(d, dst)
        notes.append("set aside %s as %s (no %s: an earlier run was cut off there; never used)"
                     % (d, os.path.basename(dst), marker))
    if notes:
        fsync_dir(parent)
    return notes


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
        conn = sqlite3.connect("file:%s?mode=ro&immutable=1" % uri_path(db), uri=True, timeout=30.0)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn, "immutable"
        except sqlite3.Error:
            conn.close()
    uri = "file:%s?mode=ro" % uri_path(db)
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
            qc = quick_check(dst)
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
    makedirs_private(base)
    name = stamp_dir_name(loc["profile"], now) + ("-" + label if label else "")
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
    rec = file_record(out)
    manifest = {
        "kind": "fleetops-snapshot", "version": 1, "created_at": iso(now), "profile": loc["profile"],
        "source": {"db": loc["db"], "open_mode": mode,
                   "sizes": {s or "db": os.path.getsize(loc["db"] + s) for s in SIDECARS
                             if os.path.exists(loc["db"] + s)}},
        "files": {"state.db": {"size": rec["size"], "sha256": rec["sha256"]}},
        "page_count": page_count, "page_size": page_size,
        "quick_check": qc, "verified": qc["ok"], "sqlite_version": sqlite3.sqlite_version,
        "elapsed_s": round(time.time() - started, 3),
    }
    write_json(os.path.join(d, "manifest.json"), manifest)
    fsync_dir(base)
    return d, manifest


def main(args):
    """Payload: {hermes_home?, profile?, min_free_factor?, dest?, label?, run_id?, _check?}."""
    args = args or {}
    try:
        loc = locate(args)
    except ValueError as exc:
        return {"changed": False, "failed": True, "skipped": False, "msg": str(exc)}
    if not os.path.isfile(loc["db"]):
        return {"changed": False, "failed": True, "skipped": False, "db": loc["db"],
                "msg": "no state.db at %s: nothing to snapshot" % loc["db"]}
    refusal = permission_refusal(loc)
    if refusal:
        return refusal
    factor = num(args.get("min_free_factor"), DEFAULT_MIN_FREE_FACTOR)
    refusal, free, need = space_check(loc, factor, args.get("dest"))
    if refusal:
        return {"changed": False, "failed": True, "skipped": False, "refused": True,
                "reason": "free_space", "free_bytes": free, "needed_bytes": need, "msg": refusal}
    if truthy(args.get("_check")):
        return {"changed": False, "failed": False, "skipped": False, "free_bytes": free,
                "needed_bytes": need,
                "msg": "check mode: would snapshot %s (%d bytes) into %s" % (
                    loc["db"], image_size(loc["db"]),
                    args.get("dest") or os.path.join(loc["fleetops"], "snapshots"))}
    lk, refused = lock_or_refusal(loc, args, "hermes_snapshot")
    if refused:
        return refused
    exit_with_connection()
    try:
        leftovers = [] if args.get("dest") else set_aside_incomplete(
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
