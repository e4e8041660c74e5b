"""What the Hermes repair step payloads share: finding a profile's store, the host lock, the
watchdog tied to the SSH connection, argument parsing, time stamps, and private (0600/0700)
files, JSON records and manifests under <hermes home>/fleetops.
Stdlib only, Python 3.8+; a library (no main).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import sqlite3
import stat
import time

from fleetops.remote.host.inputs import number
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import paths as hermes_paths
from fleetops.remote.host import hostlock
from fleetops.remote.host.durable import fsync_dir, sha256_file

SIDECARS = ("", "-wal", "-shm")
QUICK_CHECK_MAX = 1000000


def utc_ts(now=None):
    """UTC timestamp used for directory names (sortable, no colons)."""
    dt = datetime.datetime.utcfromtimestamp(time.time() if now is None else now)
    return dt.strftime("%Y%m%dT%H%M%S.%fZ")


def iso(now=None):
    return datetime.datetime.utcfromtimestamp(time.time() if now is None else now).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ")


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


def located(args):
    """(locate(args), None), or (None, the failed result naming the bad argument) for a payload
    to return as it is."""
    try:
        return locate(args), None
    except ValueError as exc:
        return None, {"changed": False, "failed": True, "skipped": False, "msg": str(exc)}


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
                              ttl=number(args.get("lock_ttl"), hostlock.DEFAULT_TTL), purpose=what,
                              wait=number(args.get("lock_wait"), 0.0))
    except hostlock.Locked as exc:
        return None, {"changed": False, "failed": True, "skipped": False, "refused": True,
                      "msg": str(exc), "lock_holder": exc.holder}
    return lk, None


_watching: list = []    # the watchdog thread, once started


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


