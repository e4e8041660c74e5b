#!/usr/bin/env python3
"""hermes_backup: a verified, consistent nightly copy of a Hermes profile's state.db.

Why it exists (field report 01): the backup must not depend on Hermes working, must be
taken while the gateway runs, must be verified before it is trusted, and must keep the
WAL small. So, per profile:

- copy through the SQLite backup API (never a file copy: state.db alone misses the WAL)
  into `<profile>/fleetops/backups/.state-<ts>.db.tmp`; in WAL mode one read transaction
  is held across all steps, so the copy is one snapshot and writers are never blocked; in
  rollback-journal mode the lock is dropped between steps so writers get in (the copy then
  restarts when they write, and after a few restarts it is taken in one step);
- `PRAGMA integrity_check` on the copy: a bad copy is deleted, logged, exit 1, and the
  earlier good backups are kept (no pruning, no checkpoint of a suspect WAL);
- fsync, rename to `state-<UTC ts>.db`, and a manifest `state-<UTC ts>.json` beside it
  (field names are read by hermes_audit for "last verified backup": keep them);
- `PRAGMA wal_checkpoint(TRUNCATE)` on the live file with a short busy timeout, skipped
  (logged, never forced) when readers or writers are busy;
- retention: the newest `--keep` verified backups of this source stay; older ones the job
  made (name pattern + manifest of ours) are deleted; nothing else is touched.

Runs as a script (installed by playbooks/backup-units.yml under ~/.local/lib/fleetops/,
started by a systemd user timer or a crontab line) and as a fleetops payload `main(args)`.
Stdlib only, Python 3.8+, one file: the installed copy has no siblings to import.
Exit codes: 0 ok, 1 backup failed (unreadable source, corrupt copy), 2 bad input (usage,
no state.db), 3 not enough free space, 4 another run holds the lock.
"""
import argparse
import datetime
import errno
import fcntl
import hashlib
import json
import os
import re
import socket
import sqlite3
import sys
import time
import urllib.parse

VERSION = "0.1.0"          # fleetops version this job ships with; written into every manifest
KIND = "fleetops-hermes-backup"
DEFAULT_KEEP = 2
SPACE_FACTOR = 1.1
WAL_STEP_PAGES = 4096      # WAL: steps only bound the work per call (the snapshot is held)
ROLLBACK_STEP_PAGES = 256  # rollback journal: the lock is released after each step
ROLLBACK_SLEEP = 0.02      # ... and writers get this long to commit between steps
MAX_RESTARTS = 5           # rollback journal: then copy in one step rather than never finish
CHECKPOINT_BUSY_MS = 2000
INTEGRITY_MAX_ERRORS = 20
LOG_MAX_BYTES = 1 << 20    # backup.log is rotated to backup.log.1 beyond this

RC_OK, RC_FAILED, RC_BAD_INPUT, RC_NO_SPACE, RC_LOCKED = 0, 1, 2, 3, 4

NAME_RE = re.compile(r"^state-(\d{8}T\d{6}Z)(?:-(\d+))?\.(db|json)$")
TMP_RE = re.compile(r"^\.state-\d{8}T\d{6}Z(?:-\d+)?\.(db|json)\.tmp(-journal|-wal|-shm)?$")


class JobError(Exception):
    """A run that must stop: `rc` is the exit code, the message says why in one line."""

    def __init__(self, rc, msg):
        Exception.__init__(self, msg)
        self.rc = rc


# ---------------------------------------------------------------- small helpers

def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def stamp(dt):
    return dt.strftime("%Y%m%dT%H%M%SZ")


def ro_uri(path):
    return "file:%s?mode=ro" % urllib.parse.quote(os.path.abspath(path))


def rw_uri(path):
    """mode=rw: opening never creates a missing state.db (a writable open would)."""
    return "file:%s?mode=rw" % urllib.parse.quote(os.path.abspath(path))


def makedirs_private(path):
    """mkdir -p; directories we create are 0700 (they hold conversation data)."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return
    makedirs_private(os.path.dirname(path))
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return
    os.chmod(path, 0o700)   # mkdir's mode is cut by the umask


def fsync_path(path, directory=False):
    fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        os.fsync(fd)
    except OSError:
        if not directory:
            raise
    finally:
        os.close(fd)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_size(path):
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def profile_name(profile_dir):
    """`default` for the Hermes root, NAME for `<root>/profiles/NAME` (what the audit calls it)."""
    parent = os.path.dirname(profile_dir.rstrip("/"))
    if os.path.basename(parent) == "profiles":
        return os.path.basename(profile_dir.rstrip("/"))
    return "default"


def write_private(path, data):
    """Temp file beside `path`, 0600, fsync, rename, fsync the directory."""
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_path(os.path.dirname(path), directory=True)


def _unlink_quiet(path):
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


# ---------------------------------------------------------------- logging

class Log:
    """One line per event to the log file (0600, created on demand), stderr, and `lines`."""

    def __init__(self, path=None, stderr=True, quiet=False):
        self.path = path
        self.stderr = stderr
        self.quiet = quiet          # stderr gets WARN/ERROR only (cron mails whatever is printed)
        self.lines = []
        self.prefix = "hermes_backup[%d]" % os.getpid()

    def _write_file(self, line):
        if not self.path:
            return
        try:
            makedirs_private(os.path.dirname(self.path))
            if file_size(self.path) > LOG_MAX_BYTES:
                os.replace(self.path, self.path + ".1")
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, (line + "\n").encode("utf-8", "replace"))
            finally:
                os.close(fd)
        except OSError as exc:
            if self.stderr:
                sys.stderr.write("%s cannot write log %s: %s\n" % (self.prefix, self.path, exc))
            self.path = None

    def __call__(self, level, msg, profile=None):
        where = " profile=%s" % profile if profile else ""
        line = "%s %s %s%s %s" % (iso(utc_now()), self.prefix, level, where, msg)
        self.lines.append(line)
        self._write_file(line)
        if self.stderr and not (self.quiet and level == "INFO"):
            sys.stderr.write(line + "\n")
            sys.stderr.flush()


# ---------------------------------------------------------------- the lock

class Lock:
    """flock on `<dest>/.backup.lock`: two runs on one destination never overlap."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                holder = ""
                try:
                    with open(self.path, encoding="utf-8", errors="replace") as f:
                        holder = f.read(200).strip()
                except OSError:
                    pass
                raise JobError(RC_LOCKED, "another backup run holds %s%s; not starting a second one"
                               % (self.path, " (%s)" % holder if holder else "")) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, ("pid %d on %s since %s\n" % (os.getpid(), socket.gethostname(), iso(utc_now()))).encode())
        self.fd = fd
        return self

    def __exit__(self, *exc):
        os.close(self.fd)   # closing releases the flock; the file stays (no unlink race)


# ---------------------------------------------------------------- the copy

def _source_facts(conn):
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0].lower()
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    return mode, page_size


def copy_database(db, tmp, log, profile, step_pages=None, progress=None):
    """Backup-API copy of `db` into `tmp`; returns (journal_mode, page_size, source_page_count)."""
    try:
        src = sqlite3.connect(ro_uri(db), uri=True, timeout=5.0, isolation_level=None)
    except sqlite3.Error as exc:
        raise JobError(RC_FAILED, "cannot open %s read-only: %s" % (db, exc)) from exc
    dst = None
    try:
        try:
            mode, page_size = _source_facts(src)
        except sqlite3.Error as exc:
            raise JobError(RC_FAILED, "cannot read %s: %s" % (db, exc)) from exc
        dst = sqlite3.connect(tmp, isolation_level=None)
        state = {"total": None, "restarts": 0, "last_remaining": None}

        def on_step(status, remaining, total):
            if state["last_remaining"] is not None and remaining > state["last_remaining"]:
                state["restarts"] += 1      # rollback mode: a writer committed between steps
                if state["restarts"] > MAX_RESTARTS:
                    raise _TooManyRestarts()
            state["last_remaining"] = remaining
            state["total"] = total
            if progress is not None:
                progress(remaining, total)

        wal = mode == "wal"
        try:
            if wal:
                # One read transaction across every step: the copy is one snapshot and, in WAL
                # mode, a reader never blocks Hermes' writers (it only holds back checkpoints).
                src.execute("BEGIN")
                src.execute("SELECT count(*) FROM sqlite_master").fetchone()
                src.backup(dst, pages=step_pages or WAL_STEP_PAGES, progress=on_step, sleep=0)
                src.execute("COMMIT")
            else:
                try:
                    src.backup(dst, pages=step_pages or ROLLBACK_STEP_PAGES, progress=on_step,
                               sleep=ROLLBACK_SLEEP)
                except _TooManyRestarts:
                    log("WARN", "writers kept changing the rollback-journal database (%d restarts); "
                                "copying in one step, which holds writers off for its duration"
                        % state["restarts"], profile)
                    state["last_remaining"] = None
                    src.backup(dst, pages=-1, progress=on_step, sleep=0)
        except sqlite3.Error as exc:
            raise JobError(RC_FAILED, "backup API copy of %s failed: %s" % (db, exc)) from exc
        except _TooManyRestarts:
            raise JobError(RC_FAILED, "backup API copy of %s kept restarting: the source changed under "
                                      "a snapshot that should have been held" % db) from None
        total = state["total"]
        if total is None:       # an empty database finishes without a progress call
            total = dst.execute("PRAGMA page_count").fetchone()[0]
        # A self-contained file: rollback-journal mode means no -wal/-shm beside the copy
        # (Hermes switches a restored file back to WAL on its first open).
        dst.execute("PRAGMA journal_mode=DELETE").fetchone()
        return mode, page_size, total
    finally:
        if dst is not None:
            dst.close()
        src.close()


class _TooManyRestarts(Exception):
    """Raised from the progress callback to abort a stepwise copy that keeps restarting."""


def integrity(path):
    """'ok', or the first errors of PRAGMA integrity_check (an unreadable file is an error too)."""
    try:
        conn = sqlite3.connect(ro_uri(path), uri=True)
    except sqlite3.Error as exc:
        return ["cannot open: %s" % exc], None
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check(%d)" % INTEGRITY_MAX_ERRORS)]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
    except sqlite3.Error as exc:
        return ["integrity_check raised: %s" % exc], None
    finally:
        conn.close()
    return ("ok" if rows == ["ok"] else rows), pages


def checkpoint(db, log, profile):
    """TRUNCATE checkpoint with a short busy timeout; busy means skipped, never forced."""
    try:
        conn = sqlite3.connect(rw_uri(db), uri=True, timeout=CHECKPOINT_BUSY_MS / 1000.0,
                               isolation_level=None)
    except sqlite3.Error as exc:
        log("WARN", "checkpoint skipped: cannot open %s read-write: %s" % (db, exc), profile)
        return {"done": False, "why": str(exc)}
    try:
        wal_before = file_size(db + "-wal")
        try:
            busy, log_frames, done_frames = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError as exc:
            log("INFO", "checkpoint skipped: %s (writers busy; not forced)" % exc, profile)
            return {"done": False, "why": str(exc), "wal_bytes": wal_before}
        if busy:
            log("INFO", "checkpoint skipped: database busy (%s of %s WAL frames checkpointed; not forced)"
                % (done_frames, log_frames), profile)
            return {"done": False, "why": "busy", "wal_bytes": wal_before}
        log("INFO", "checkpoint(TRUNCATE) done: WAL %d -> %d bytes" % (wal_before, file_size(db + "-wal")),
            profile)
        return {"done": True, "wal_bytes_before": wal_before, "wal_bytes": file_size(db + "-wal")}
    finally:
        conn.close()


# ---------------------------------------------------------------- retention

def read_manifest(path):
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError):
        return None
    return m if isinstance(m, dict) else None


def our_backups(dest, source):
    """Verified backups of `source` that this job made: name pattern + our manifest + file there."""
    found = []
    for name in os.listdir(dest):
        mt = NAME_RE.match(name)
        if not mt or mt.group(3) != "json":
            continue
        mpath = os.path.join(dest, name)
        m = read_manifest(mpath)
        if not m or m.get("kind") != KIND or m.get("source") != source:
            continue
        db_name = name[:-len(".json")] + ".db"
        bpath = os.path.join(dest, db_name)
        if os.path.basename(str(m.get("path") or "")) != db_name or not os.path.isfile(bpath):
            continue
        if m.get("integrity") != "ok":
            continue
        found.append({"manifest": mpath, "path": bpath, "created": str(m.get("created") or ""),
                      "order": (mt.group(1), int(mt.group(2) or 0))})
    found.sort(key=lambda b: (b["created"], b["order"]), reverse=True)
    return found


def prune(dest, source, keep, log, profile):
    """Delete the job's own verified backups of `source` beyond the newest `keep`."""
    backups = our_backups(dest, source)
    removed = []
    for b in backups[keep:]:
        _unlink_quiet(b["path"])
        _unlink_quiet(b["manifest"])
        removed.append(b["path"])
        log("INFO", "retention: removed %s (keeping the newest %d)" % (b["path"], keep), profile)
    if removed:
        fsync_path(dest, directory=True)
    return [b["path"] for b in backups[:keep]], removed


def clean_stale_temps(dest, log, profile):
    """Temp files of a crashed earlier run (we hold the lock, so nobody else is writing them)."""
    for name in os.listdir(dest):
        if TMP_RE.match(name):
            if _unlink_quiet(os.path.join(dest, name)):
                log("INFO", "removed stale temp file %s from an interrupted run" % name, profile)


def unique_names(dest, now):
    """A name no backup of this second has had: past the highest suffix still there, so a name
    that retention just removed is never given to a newer backup (the newest is always kept)."""
    base = "state-" + stamp(now)
    taken = [-1]
    for name in os.listdir(dest):
        mt = NAME_RE.match(name)
        if mt and "state-" + mt.group(1) == base:
            taken.append(int(mt.group(2) or 0))
    n = max(taken) + 1
    return base if n == 0 else "%s-%d" % (base, n)


# ---------------------------------------------------------------- one profile

def backup_profile(profile_dir, keep=DEFAULT_KEEP, dest=None, log=None, step_pages=None,
                   progress=None, check=False):
    """Back up one profile. Returns a dict with rc, msg, manifest, checkpoint, kept, removed."""
    profile_dir = os.path.abspath(os.path.expanduser(str(profile_dir)))
    profile = profile_name(profile_dir)
    db = os.path.join(profile_dir, "state.db")
    dest = os.path.abspath(os.path.expanduser(dest)) if dest else os.path.join(profile_dir, "fleetops", "backups")
    log = log or Log(None)
    out = {"profile_dir": profile_dir, "profile": profile, "source": db, "dest": dest, "rc": RC_OK,
           "msg": "", "manifest": None, "checkpoint": None, "kept": [], "removed": []}
    try:
        if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
            raise JobError(RC_BAD_INPUT, "keep must be a whole number >= 1, got %r" % (keep,))
        if not os.path.isfile(db):
            raise JobError(RC_BAD_INPUT, "no state.db in %s: nothing to back up" % profile_dir)
        if check:
            out["msg"] = "would back up %s (%d bytes + %d WAL) into %s, keep %d" % (
                db, file_size(db), file_size(db + "-wal"), dest, keep)
            return out
        makedirs_private(dest)
        with Lock(os.path.join(dest, ".backup.lock")):
            _run_locked(db, dest, keep, log, profile, profile_dir, out, step_pages, progress)
    except JobError as exc:
        out["rc"], out["msg"] = exc.rc, str(exc)
        log("ERROR", str(exc), profile_dir)
    except OSError as exc:
        where = " (%s)" % exc.filename if getattr(exc, "filename", None) else ""
        out["rc"], out["msg"] = RC_FAILED, "%s%s" % (exc.strerror or exc, where)
        log("ERROR", out["msg"], profile_dir)
    return out


def _run_locked(db, dest, keep, log, profile, profile_dir, out, step_pages, progress):
    started = time.monotonic()
    created = utc_now()
    clean_stale_temps(dest, log, profile_dir)
    need = int((file_size(db) + file_size(db + "-wal")) * SPACE_FACTOR)
    free = free_bytes(dest)
    if free < need:
        raise JobError(RC_NO_SPACE, "refusing: %d bytes free in %s, need %d (source %s size x %.1f); "
                                    "earlier backups kept" % (free, dest, need, db, SPACE_FACTOR))
    name = unique_names(dest, created)
    final = os.path.join(dest, name + ".db")
    tmp = os.path.join(dest, "." + name + ".db.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)   # SQLite keeps the mode
    os.close(fd)
    log("INFO", "backup of %s started -> %s" % (db, final), profile_dir)
    try:
        mode, page_size, src_pages = copy_database(db, tmp, log, profile_dir, step_pages, progress)
        result, copy_pages = integrity(tmp)
        if result != "ok":
            earlier = [b["path"] for b in our_backups(dest, db)]
            raise JobError(RC_FAILED, "integrity_check failed on the copy of %s: %s; copy deleted, "
                                      "%d earlier verified backup(s) kept, WAL not checkpointed"
                           % (db, "; ".join(result[:5]), len(earlier)))
        os.chmod(tmp, 0o600)
        fsync_path(tmp)
        size = file_size(tmp)
        digest = sha256_file(tmp)
        duration = round(time.monotonic() - started, 3)
        manifest = {
            "kind": KIND,
            "path": final,
            "created": iso(created),
            "size": size,
            "sha256": digest,
            "integrity": "ok",
            "source": db,
            "source_journal_mode": mode,
            "source_page_size": page_size,
            "source_page_count": src_pages,
            "page_count": copy_pages,
            "profile": profile,
            "profile_dir": profile_dir,
            "host": socket.gethostname(),
            "sqlite_version": sqlite3.sqlite_version,
            "duration_seconds": duration,
            "fleetops_version": VERSION,
        }
        os.replace(tmp, final)
        fsync_path(dest, directory=True)
        write_private(os.path.join(dest, name + ".json"), (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode())
    finally:
        for suffix in ("", "-journal", "-wal", "-shm"):
            _unlink_quiet(tmp + suffix)
    log("INFO", "verified backup %s (%d bytes, %d pages, sha256 %s, %.3f s)"
        % (final, size, src_pages, digest[:16], duration), profile_dir)
    out["manifest"] = manifest
    out["checkpoint"] = checkpoint(db, log, profile_dir) if mode == "wal" else {
        "done": False, "why": "source in %s journal mode, no WAL" % mode}
    out["kept"], out["removed"] = prune(dest, db, keep, log, profile_dir)
    out["msg"] = "verified backup %s" % final


# ---------------------------------------------------------------- entry points

def run(profile_dirs, keep=DEFAULT_KEEP, dest=None, log_path=None, stderr=True, check=False, quiet=False,
        **kw):
    """Every profile in turn (one failing does not stop the others); returns (rc, results, log)."""
    results = []
    log = Log(None, stderr=stderr, quiet=quiet)
    for pdir in profile_dirs:
        pabs = os.path.abspath(os.path.expanduser(str(pdir)))
        if log_path:
            log.path = os.path.abspath(os.path.expanduser(log_path))
        elif os.path.isdir(pabs) and not check:
            log.path = os.path.join(pabs, "fleetops", "logs", "backup.log")
        else:
            log.path = None    # never create a profile directory just to log that it is missing
        results.append(backup_profile(pdir, keep=keep, dest=dest, log=log, check=check, **kw))
    rcs = [r["rc"] for r in results if r["rc"] != RC_OK]
    return (max(rcs) if rcs else RC_OK), results, log


def status(profile_dirs, dest=None):
    """Newest verified backup per profile, re-checked on disk (size and sha256 against the manifest)."""
    out = []
    for pdir in profile_dirs:
        pabs = os.path.abspath(os.path.expanduser(str(pdir)))
        db = os.path.join(pabs, "state.db")
        d = os.path.abspath(os.path.expanduser(dest)) if dest else os.path.join(pabs, "fleetops", "backups")
        rec = {"profile_dir": pabs, "source": db, "dest": d, "verified": False, "newest": None,
               "count": 0, "why": None}
        found = our_backups(d, db) if os.path.isdir(d) else []
        rec["count"] = len(found)
        if not found:
            rec["why"] = "no backup made by this job in %s" % d
        else:
            m = read_manifest(found[0]["manifest"])
            rec["newest"] = m
            if file_size(found[0]["path"]) != m.get("size"):
                rec["why"] = "size of %s differs from its manifest" % found[0]["path"]
            elif sha256_file(found[0]["path"]) != m.get("sha256"):
                rec["why"] = "sha256 of %s differs from its manifest" % found[0]["path"]
            else:
                rec["verified"] = True
        out.append(rec)
    return out


def make_dirs(dirs, record, check):
    """Create missing directories 0700 and append the ones created to `record`, so that
    removal later takes away exactly what was made here and nothing the user had."""
    made = []
    for d in dirs:
        d = os.path.abspath(os.path.expanduser(str(d)))
        chain = []
        while not os.path.isdir(d):
            chain.append(d)
            d = os.path.dirname(d)
        made += [c for c in reversed(chain) if c not in made]
    if made and not check:
        for d in made:
            os.mkdir(d, 0o700)
            os.chmod(d, 0o700)
        record = os.path.abspath(os.path.expanduser(record))
        fd = os.open(record, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, "".join(d + "\n" for d in made).encode("utf-8", "surrogateescape"))
            os.fsync(fd)
        finally:
            os.close(fd)
    return made


def remove_dirs(record, check):
    """Remove the record, then each directory it lists if empty, deepest first."""
    record = os.path.abspath(os.path.expanduser(record))
    try:
        with open(record, encoding="utf-8", errors="surrogateescape") as f:
            listed = [line.rstrip("\n") for line in f if line.strip()]
    except FileNotFoundError:
        return [], []
    removed, kept = [], []
    if not check:
        os.unlink(record)
    for d in sorted(set(listed), key=lambda p: (p.count("/"), p), reverse=True):
        if not os.path.isdir(d) or os.path.islink(d):
            continue
        left = [p for p in (os.path.join(d, n) for n in os.listdir(d)) if p != record and p not in removed]
        if left:
            kept.append(d)       # something of the user's (or not yet removed) is inside: keep it
            continue
        if not check:
            os.rmdir(d)
        removed.append(d)
    return removed, kept


def _contract(changed=False, failed=False, msg="", skipped=False, **extra):
    out = {"changed": bool(changed), "failed": bool(failed), "skipped": bool(skipped), "msg": msg}
    out.update(extra)
    return out


def main(args):
    """Payload entry. action backup (default): {profile_dirs, keep, dest, log}; status:
    {profile_dirs, dest}; mkdirs: {dirs, record}; rmdirs: {record}. `_check` changes nothing."""
    args = args or {}
    action = args.get("action") or "backup"
    check = bool(args.get("_check"))
    dirs = args.get("profile_dirs") or args.get("profile_dir") or ["~/.hermes"]
    if isinstance(dirs, str):
        dirs = [dirs]
    try:
        if action == "status":
            recs = status(dirs, args.get("dest") or None)
            bad = ["%s: %s" % (r["profile_dir"], r["why"]) for r in recs if not r["verified"]]
            return _contract(msg="; ".join(bad) or "verified backups: %d profile(s)" % len(recs), profiles=recs,
                             verified=sum(1 for r in recs if r["verified"]), version=VERSION)
        if action == "mkdirs":
            if not args.get("record"):
                return _contract(failed=True, msg="mkdirs needs record")
            made = make_dirs(args.get("dirs") or [], args["record"], check)
            return _contract(changed=bool(made), created=made,
                             msg=("%screated %s" % ("would have " if check else "", ", ".join(made))) if made else "")
        if action == "rmdirs":
            if not args.get("record"):
                return _contract(failed=True, msg="rmdirs needs record")
            removed, kept = remove_dirs(args["record"], check)
            return _contract(changed=bool(removed), removed=removed, kept=kept,
                             msg="%sremoved %s%s" % ("would have " if check else "", ", ".join(removed) or "nothing",
                                                     "; kept non-empty %s" % ", ".join(kept) if kept else ""))
    except OSError as exc:
        where = " (%s)" % exc.filename if getattr(exc, "filename", None) else ""
        return _contract(failed=True, msg="%s%s" % (exc.strerror or exc, where))
    if action != "backup":
        return _contract(failed=True, msg="unknown action %r (backup, status, mkdirs, rmdirs)" % (action,))
    keep = args.get("keep", DEFAULT_KEEP)
    try:
        keep = int(keep)
    except (TypeError, ValueError):
        return _contract(failed=True, rc=RC_BAD_INPUT, msg="keep must be a whole number >= 1, got %r" % (keep,))
    rc, results, log = run(dirs, keep=keep, dest=args.get("dest") or None, log_path=args.get("log") or None,
                           stderr=False, check=check)
    failed = rc != RC_OK
    manifests = [r["manifest"] for r in results if r["manifest"]]
    return _contract(changed=not check and bool(manifests), failed=failed, skipped=check and not failed,
                     msg="; ".join("%s: %s" % (r["profile_dir"], r["msg"]) for r in results), rc=rc,
                     results=results, verified=len(manifests), log=log.lines, version=VERSION)


def parse_span(text):
    """Seconds in a systemd-style time span ("1800", "90s", "30m", "1h 30min"); ValueError if not."""
    units = {"": 1, "s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60,
             "minutes": 60, "h": 3600, "hr": 3600, "hour": 3600, "hours": 3600}
    parts = re.findall(r"(\d+)\s*([a-z]*)", str(text).strip().lower())
    if not parts or re.sub(r"[\d\sa-z]", "", str(text).lower()) or \
            "".join(n + u for n, u in parts) != re.sub(r"\s", "", str(text).lower()):
        raise ValueError("not a time span: %r" % (text,))
    total = 0
    for n, u in parts:
        if u not in units:
            raise ValueError("unknown time unit %r in %r" % (u, text))
        total += int(n) * units[u]
    return total


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        """Bad input is one line, not argparse's usage block."""
        sys.stderr.write("hermes_backup: %s (see --help)\n" % message)
        sys.exit(RC_BAD_INPUT)


def cli(argv=None):
    p = _Parser(prog="hermes_backup.py",
                description="Verified consistent backup of Hermes state.db (fleetops %s)." % VERSION)
    p.add_argument("--profile-dir", action="append", required=True, metavar="DIR",
                   help="Hermes profile directory holding state.db (repeatable), e.g. ~/.hermes")
    p.add_argument("--keep", type=int, default=DEFAULT_KEEP, help="verified backups to keep (default 2)")
    p.add_argument("--dest", metavar="DIR", help="backup directory (default <profile>/fleetops/backups)")
    p.add_argument("--log", metavar="FILE", help="log file (default <profile>/fleetops/logs/backup.log)")
    p.add_argument("--random-delay", metavar="SPAN", default="0",
                   help="sleep a random time up to SPAN first (cron's stand-in for RandomizedDelaySec)")
    p.add_argument("--quiet", action="store_true", help="stderr only for warnings and errors (cron)")
    p.add_argument("--version", action="version", version=VERSION)
    ns = p.parse_args(argv)
    if ns.keep < 1:
        p.error("--keep must be >= 1, got %d" % ns.keep)
    try:
        delay = parse_span(ns.random_delay)
    except ValueError as exc:
        p.error("--random-delay: %s" % exc)
    if delay:
        import random
        time.sleep(random.SystemRandom().uniform(0, delay))   # spread a fleet's nightly load
    os.umask(0o077)
    rc, _, _ = run(ns.profile_dir, keep=ns.keep, dest=ns.dest, log_path=ns.log, quiet=ns.quiet)
    return rc


if __name__ == "__main__":
    sys.exit(cli())
