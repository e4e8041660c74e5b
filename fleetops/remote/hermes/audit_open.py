"""How the audit opens a state.db without writing a byte beside it, and the file facts it
reads before opening.

- a WAL-mode file whose -wal is absent is read with `immutable=1` (a read-only open would
  otherwise create empty -wal/-shm files beside it);
- with -wal and -shm present it is read with `readonly_shm=1` (not even the wal-index is
  written); only if that is refused, plain `mode=ro` on the existing -shm;
- -wal present but -shm absent: SQLite replays the WAL's committed frames on the next open, so
  the audit judges that image, never the main file alone: wal_image lays the committed frames
  (cumulative checksums, as SQLite checks them) over a private copy in a 0700 temporary
  directory, read with `immutable=1` (creating a -shm next to a process still holding a deleted
  one is how split-brain corruption starts, so nothing is opened beside the original); the
  frames SQLite ignores are named for what they are (an earlier generation's, a torn or
  unfinished transaction's, a WAL SQLite rejects whole);
- a zero-length or non-SQLite file is never handed to SQLite (a zero-page file with a
  -wal makes SQLite delete the -wal on open): read_header checks the header first.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import quote as _urlquote

from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.header import HEADER_MAGIC, parse_header
from fleetops.remote.sqlite.fileformat.wal import apply_wal, read_wal

Warning = Dict[str, str]     # {code, msg}: never changes the verdict


def _user(uid: int) -> str:
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return str(uid)


def file_facts(path: str) -> Optional[Dict[str, Any]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"size": st.st_size, "uid": st.st_uid, "owner": _user(st.st_uid),
            "mode": "%04o" % (st.st_mode & 0o7777), "mtime": st.st_mtime}


def read_header(path: str) -> Dict[str, Any]:
    """The 100-byte SQLite header, parsed by the shared format reader without SQLite:
    {"valid": bool, "reason", page_size, ...}."""
    try:
        with open(path, "rb") as f:
            buf = f.read(100)
    except OSError as exc:
        return {"valid": False, "reason": "cannot read: %s" % exc.strerror}
    if len(buf) == 0:
        return {"valid": False, "reason": "empty file (0 bytes)"}
    if len(buf) < 100 or buf[:16] != HEADER_MAGIC:
        return {"valid": False, "reason": "not a SQLite database (bad header)"}
    try:
        h = parse_header(buf)
    except FormatError as exc:
        return {"valid": False, "reason": "invalid header: %s" % exc}
    versions = (h.write_version, h.read_version)
    return {
        "valid": True, "reason": None,
        "page_size": h.page_size,
        "page_count": h.header_page_count if h.header_page_count and h.version_valid_for == h.change_counter
        else None,
        "freelist_count": h.freelist_count,
        "journal_mode": "wal" if versions == (2, 2) else ("rollback" if versions == (1, 1)
                                                          else "unknown(%d,%d)" % versions),
        "schema_cookie": h.schema_cookie,
        "schema_format": h.schema_format,
        "text_encoding": {1: "UTF-8", 2: "UTF-16le", 3: "UTF-16be"}.get(h.text_encoding, str(h.text_encoding)),
        "user_version": h.user_version,
        "sqlite_version_number": h.sqlite_version,
    }


def free_space(path: str) -> Tuple[Optional[int], Optional[int]]:
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
        return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    except OSError:
        return None, None


def open_readonly(db: str, header: Dict[str, Any],
                  timeout: float = 10.0) -> Tuple[sqlite3.Connection, str, List[Warning]]:
    """(connection, open_mode, warnings) following the module docstring's rules; raises sqlite3.Error."""
    wal_exists = os.path.exists(db + "-wal")
    shm_exists = os.path.exists(db + "-shm")
    base = "file:%s?mode=ro" % _urlquote(os.path.abspath(db))
    warnings: List[Warning] = []
    if header.get("journal_mode") == "wal" and not wal_exists:
        attempts = [("immutable", base + "&immutable=1")]
    elif wal_exists and not shm_exists:
        attempts = [("immutable", base + "&immutable=1")]
    elif wal_exists:
        attempts = [("ro+readonly_shm", base + "&readonly_shm=1"), ("ro", base)]
    else:
        attempts = [("ro", base)]
    last: Optional[sqlite3.Error] = None
    for mode, uri in attempts:
        conn = None
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None,
                                   check_same_thread=False)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn, mode, warnings
        except sqlite3.Error as exc:
            last = exc
            if conn is not None:
                conn.close()
    assert last is not None     # attempts is never empty
    raise last


def conn_uri(db: str, mode: str) -> str:
    """The URI open_readonly opened `db` with in `mode`: each worker opens the file the same way."""
    base = "file:%s?mode=ro" % _urlquote(os.path.abspath(db))
    return base + {"immutable": "&immutable=1", "ro+readonly_shm": "&readonly_shm=1"}.get(mode, "")


def bound_memory(conn: sqlite3.Connection, opts: Dict[str, Any]) -> None:
    """A fixed page cache and no memory map per connection: a 10 GB store costs the host a few
    MB per worker, not its size in RAM, and evicts little of the page cache the gateway uses."""
    conn.execute("PRAGMA cache_size=-%d" % int(opts["cache_kib"]))
    conn.execute("PRAGMA mmap_size=0")


def worker_connection(uri: str, opts: Dict[str, Any]) -> sqlite3.Connection:
    """One more read-only connection, in its own read transaction, for a check worker."""
    conn = sqlite3.connect(uri, uri=True, timeout=opts["busy_timeout"], isolation_level=None,
                           check_same_thread=False)
    try:
        bound_memory(conn, opts)
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def wal_frames(summary: Dict[str, Any]) -> str:
    """What of a -wal SQLite replays and what it ignores, in words (read_wal's summary)."""
    if summary.get("error"):
        return "SQLite ignores it whole (%s)" % summary["error"]
    parts = ["%d committed frames SQLite replays on its next open" % summary["frames_committed"]]
    if summary.get("stale_frames"):
        parts.append("%d frames of an earlier WAL generation (other salts), which it ignores" % summary["stale_frames"])
    torn = summary["frames_total"] - summary["frames_committed"] - (summary.get("stale_frames") or 0)
    if torn > 0:
        parts.append("%d frames after the last commit that checks out (a torn or unfinished transaction), "
                     "which it ignores" % torn)
    if summary.get("partial_frame_bytes"):
        parts.append("a partial frame of %d bytes" % summary["partial_frame_bytes"])
    return ", ".join(parts)


def wal_image(db: str, header: Dict[str, Any]) -> Tuple[str, Optional[str], List[Warning], Optional[Dict[str, Any]]]:
    """For a -wal without -shm: (path to audit, temporary directory or None, warnings, WAL summary).

    With committed frames, the path is a private copy with them applied (the image SQLite itself
    will open); with none, or when the copy cannot be made, the main file (and a warning says so).
    """
    if not os.path.exists(db + "-wal") or os.path.exists(db + "-shm"):
        return db, None, [], None
    try:
        summary = dict((k, v) for k, v in read_wal(db + "-wal", header.get("page_size")).items() if k != "pages")
    except OSError as exc:
        return db, None, [{"code": "wal_unread", "msg": "state.db-wal without state.db-shm cannot be read (%s): "
                           "figures describe the main file only" % exc.strerror}], None
    said = "state.db-wal without state.db-shm: " + wal_frames(summary)
    if summary.get("error") or not summary["frames_committed"]:
        return db, None, [{"code": "wal_ignored", "msg": said + "; the main file is the image SQLite opens"}], summary
    need = os.path.getsize(db) + os.path.getsize(db + "-wal")
    tmp = tempfile.mkdtemp(prefix="fleetops-audit-wal-")     # 0700, away from the original
    free = free_space(os.path.join(tmp, "x"))[0]
    if free is not None and free < need:
        shutil.rmtree(tmp, ignore_errors=True)
        return db, None, [{"code": "wal_unread", "msg": said + "; not read: %.1f MB needed for a private copy, "
                           "%.1f MB free in %s: figures describe the main file only"
                           % (need / 1048576.0, free / 1048576.0, tempfile.gettempdir())}], summary
    copy = os.path.join(tmp, "state.db")
    try:
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out, open(db, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        applied = apply_wal(copy, db + "-wal")
    except (OSError, FormatError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        return db, None, [{"code": "wal_unread", "msg": said + "; not read (%s): figures describe the main file "
                           "only" % exc}], summary
    summary["pages_applied"] = applied.get("pages_applied")
    return copy, tmp, [{"code": "wal_replayed", "msg": said + "; the audit judged that image (%d pages over the "
                        "main file, in a private copy)" % summary["pages_applied"]}], summary
