"""How the audit opens a state.db without writing a byte beside it, and the file facts it
reads before opening.

- a WAL-mode file whose -wal is absent is read with `immutable=1` (a read-only open would
  otherwise create empty -wal/-shm files beside it);
- with -wal and -shm present it is read with `readonly_shm=1` (not even the wal-index is
  written); only if that is refused, plain `mode=ro` on the existing -shm;
- -wal present but -shm absent: the WAL is NOT read (creating a new -shm next to a process
  still holding a deleted one is how split-brain corruption starts); the main file is
  read with `immutable=1` and a warning says the WAL was not read;
- a zero-length or non-SQLite file is never handed to SQLite (a zero-page file with a
  -wal makes SQLite delete the -wal on open): read_header checks the header first.
"""
import os
import sqlite3

try:
    from urllib.parse import quote as _urlquote
except ImportError:  # pragma: no cover
    from urllib import quote as _urlquote

from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.header import HEADER_MAGIC, parse_header


def _user(uid):
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return str(uid)


def file_facts(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"size": st.st_size, "uid": st.st_uid, "owner": _user(st.st_uid),
            "mode": "%04o" % (st.st_mode & 0o7777), "mtime": st.st_mtime}


def read_header(path):
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


def free_space(path):
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
        return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    except OSError:
        return None, None


def open_readonly(db, header, timeout=10.0):
    """(connection, open_mode, warnings) following the module docstring's rules; raises sqlite3.Error."""
    wal_exists = os.path.exists(db + "-wal")
    shm_exists = os.path.exists(db + "-shm")
    base = "file:%s?mode=ro" % _urlquote(os.path.abspath(db))
    warnings = []
    if header.get("journal_mode") == "wal" and not wal_exists:
        attempts = [("immutable", base + "&immutable=1")]
    elif wal_exists and not shm_exists:
        attempts = [("immutable", base + "&immutable=1")]
        warnings.append({"code": "wal_unread", "msg": "state.db-wal exists without state.db-shm: the WAL was not "
                         "read (the audit will not create a -shm); figures describe the main file only"})
    elif wal_exists:
        attempts = [("ro+readonly_shm", base + "&readonly_shm=1"), ("ro", base)]
    else:
        attempts = [("ro", base)]
    last = None
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
    raise last


def conn_uri(db, mode):
    """The URI open_readonly opened `db` with in `mode`: each worker opens the file the same way."""
    base = "file:%s?mode=ro" % _urlquote(os.path.abspath(db))
    return base + {"immutable": "&immutable=1", "ro+readonly_shm": "&readonly_shm=1"}.get(mode, "")


def bound_memory(conn, opts):
    """A fixed page cache and no memory map per connection: a 10 GB store costs the host a few
    MB per worker, not its size in RAM, and evicts little of the page cache the gateway uses."""
    conn.execute("PRAGMA cache_size=-%d" % int(opts["cache_kib"]))
    conn.execute("PRAGMA mmap_size=0")


def worker_connection(uri, opts):
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
