"""Read-only health audit of every Hermes state.db on a host: one payload, one round trip.

Why each check exists is in the field reports: quick_check must get a large N (the
default cap of 100 hid structural damage behind FTS errors); counts must come from
table scans (count(*) answered from a damaged unique index hid a duplicated row); the
host's sqlite3 may lack `.recover`; a desktop backend nobody remembered held the file.

Read-only, provably:
- the file is never opened writable; `mode=ro` always, and never a checkpoint;
- a WAL-mode file whose -wal is absent is read with `immutable=1` (a read-only open would
  otherwise create empty -wal/-shm files beside it);
- with -wal and -shm present it is read with `readonly_shm=1` (not even the wal-index is
  written); only if that is refused, plain `mode=ro` on the existing -shm;
- -wal present but -shm absent: the WAL is NOT read (creating a new -shm next to a process
  still holding a deleted one is how split-brain corruption starts); the main file is
  read with `immutable=1` and a warning says the WAL was not read;
- the checks run side by side on one read-only connection per core (run_checks), all reading
  one snapshot, so a live writer cannot make count(*) and count(*) NOT INDEXED disagree;
- FTS5's 'integrity-check' is an INSERT and fails on a read-only handle, so FTS tables
  are checked read-only by audit_fts (an fts5vocab walk of the whole index in TEMP). On
  SQLite >= 3.44 quick_check itself also runs FTS5's own integrity check.
- a zero-length or non-SQLite file is never handed to SQLite (a zero-page file with a
  -wal makes SQLite delete the -wal on open).

Stdlib only, Python 3.8+ / SQLite 3.31+.
"""
import datetime
import glob
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback

try:
    from urllib.parse import quote as _urlquote
except ImportError:  # pragma: no cover
    from urllib import quote as _urlquote

from fleetops.remote.hermes import audit_fts
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import journal as hermes_journal
from fleetops.remote.hermes import paths as hermes_paths
from fleetops.remote.hermes import persistence as hermes_persistence
from fleetops.remote.host.durable import sha256_file
from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.header import HEADER_MAGIC, parse_header
from fleetops.remote.sqlite.fileformat.reader import SQLiteFile
from fleetops.remote.sqlite.fileformat.wal import read_wal
from fleetops.remote.sqlite import workers as sqlite_workers

AUDIT_VERSION = 1
VERDICTS = ("healthy", "fts_index_damage", "index_damage", "structural_corruption",
            "unreadable", "retired_wal", "not_persisting", "missing")
# Worst first: what an operator must look at first.
SEVERITY = {"structural_corruption": 6, "unreadable": 6, "retired_wal": 5, "not_persisting": 5, "index_damage": 4,
            "fts_index_damage": 3, "missing": 2, "healthy": 0}
DEFAULTS = {
    "deep": False,
    "quick_check_max": 1000000,
    "backup_max_age_hours": 26,
    "wal_warn_mb": 64,
    "holders": True,
    "services": True,
    "tooling": True,
    "backup_verify_sha256": False,
    "busy_timeout": 10.0,
    "evidence_days": 7,
    "log_tail_bytes": 1048576,
    "stale_hours": 6,
    "write_probe": False,
    "jobs": 0,            # check workers: 0 = one per core this process may use
    "budget_gb": 0,       # > 0: on a bigger store, no FTS index walk unless deep
    "cache_kib": 8192,    # SQLite page cache per connection
}
FTS_SHADOW_SUFFIXES = ("_data", "_idx", "_content", "_docsize", "_config",            # fts5
                       "_segments", "_segdir", "_stat")                               # fts3/4
SAMPLES = 5
KEEP_LINES = 200

_TREE_RE = re.compile(r"^Tree (\d+) page (\d+)(?: cell (\d+))?: (.*)$")
_TREE_ONLY_RE = re.compile(r"^Tree (\d+): (.*)$")
_OLD_TREE_RE = re.compile(r"^On (?:tree )?page (\d+)(?: cell (\d+))?[^:]*: (.*)$")
_PAGE_MSG_RE = re.compile(r"^Page (\d+): (?!never used)(.*)$")
_INDEX_MSG_RES = (
    re.compile(r"^row \d+ missing from index (\S+)"),
    re.compile(r"^wrong # of entries in index (\S+)"),
    re.compile(r"^non-unique entry in UNIQUE index (\S+)"),
    re.compile(r"^index (\S+) stores an imprecise"),
    re.compile(r"^rowid \d+ missing from index (\S+)"),
)
_TABLE_COL_RE = re.compile(r"^(NULL|NUMERIC|TEXT|BLOB|INTEGER|REAL) value in ([^.\s]+)\.(\S+)")
_CHECK_RE = re.compile(r"^CHECK constraint failed in (\S+)")
_FTS_MSG_RE = re.compile(r"(?:FTS5 table|fts5[^\"]*table) \"?(?:main\.)?([A-Za-z0-9_]+)\"?", re.I)


def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y")
    return bool(value)


def _num(value, default, cast=float):
    try:
        if value is None or value == "":
            return default
        return cast(value)
    except (TypeError, ValueError):
        return default


def _user(uid):
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return str(uid)


def _iso(ts):
    return datetime.datetime.utcfromtimestamp(ts).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_utc(text):
    """UTC ISO timestamps as written by backup manifests ('Z' or +00:00); None if unparsable."""
    if not isinstance(text, str) or not text:
        return None
    t = text.strip()
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    try:
        dt = datetime.datetime.fromisoformat(t)
    except ValueError:
        for fmt in ("%Y%m%dT%H%M%S", "%Y%m%d-%H%M%S", "%Y%m%d_%H%M%S"):
            try:
                dt = datetime.datetime.strptime(text.strip()[:15], fmt)
                break
            except ValueError:
                dt = None
        if dt is None:
            return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.timezone.utc)
    return dt.timestamp()


# --- files ------------------------------------------------------------------------------------

def _file_facts(path):
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


def _free_space(path):
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
        return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize
    except OSError:
        return None, None


# --- opening ----------------------------------------------------------------------------------

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


def _worker_connection(uri, opts):
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


# --- schema -----------------------------------------------------------------------------------

def read_schema(conn):
    """Objects of sqlite_master with FTS roles worked out: {name: {type, tbl_name, rootpage, sql, role, fts}}."""
    rows = conn.execute("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master").fetchall()
    objs = {}
    fts = {}
    for typ, name, tbl, root, sql in rows:
        objs[name] = {"type": typ, "name": name, "tbl_name": tbl, "rootpage": root, "sql": sql or "",
                      "role": typ, "fts": None}
        m = re.match(r"\s*CREATE\s+VIRTUAL\s+TABLE\s+.*?\bUSING\s+(fts[345])\s*\((.*)\)\s*$", sql or "",
                     re.I | re.S)
        if typ == "table" and m:
            args = m.group(2)
            tok = re.search(r"tokenize\s*=\s*['\"]?\s*([A-Za-z0-9_]+)", args, re.I)
            det = re.search(r"detail\s*=\s*['\"]?([A-Za-z]+)", args, re.I)
            con = re.search(r"content\s*=\s*(['\"])(.*?)\1", args, re.I)
            csz = re.search(r"columnsize\s*=\s*['\"]?([01])", args, re.I)
            fts[name] = {"module": m.group(1).lower(), "tokenizer": tok.group(1).lower() if tok else "unicode61",
                         "detail": det.group(1).lower() if det else "full",
                         "content": con.group(2) if con else None,
                         "columnsize": csz.group(1) != "0" if csz else True}
            objs[name]["role"] = "fts"
            objs[name]["fts"] = name
    for name, o in objs.items():
        if o["role"] == "fts":
            continue
        for vt in fts:
            if o["type"] == "table" and name.startswith(vt + "_") and name[len(vt):] in FTS_SHADOW_SUFFIXES:
                o["role"] = "fts_shadow"
                o["fts"] = vt
    for o in objs.values():  # indexes (autoindexes) of shadow tables are FTS too
        if o["type"] == "index":
            owner = objs.get(o["tbl_name"])
            if owner is not None and owner["fts"]:
                o["role"] = "fts_shadow_index"
                o["fts"] = owner["fts"]
    return objs, fts


def _base_tables(objs):
    return [o for o in objs.values() if o["type"] == "table" and o["role"] == "table"
            and o["rootpage"] and not o["name"].startswith("sqlite_stat")]


# --- page -> b-tree map (for SQLite < 3.43, whose check lines name pages, not trees) ----------

def page_owners(db, header, objs, use_wal, wanted=None):
    """{page number: object name} for the pages reachable from each root (interior, leaf, and the
    damaged ones a parent points at), by the shared format reader; with `wanted`, the walk
    stops once every wanted page is placed and only those are kept.

    Only used to say which b-tree a page named by the integrity check belongs to. With
    `use_wal` the WAL's frames are laid over the main file up to its last commit whose
    cumulative checksums hold, as SQLite itself would read them.
    """
    overlay, db_pages = {}, None
    if use_wal and os.path.exists(db + "-wal"):
        try:
            w = read_wal(db + "-wal", header["page_size"])
            if not w.get("error"):
                overlay, db_pages = w["pages"], w["db_pages"]
        except (OSError, FormatError):
            overlay = {}
    owners = {}
    wanted = set(wanted) if wanted is not None else None
    with SQLiteFile(db, overlay=overlay, page_count=db_pages) as f:
        claimed = {}
        for o in sorted(objs.values(), key=lambda x: x["rootpage"] or 0):
            root = o["rootpage"]
            if not root:
                continue
            walk = f.walk_btree(int(root), owner=o["name"], claimed=claimed)
            for pg in list(walk.pages) + list(walk.bad_pages):
                if wanted is None or pg in wanted:
                    owners.setdefault(pg, o["name"])
            if wanted is not None and wanted.issubset(owners):
                break
    return owners


# --- integrity --------------------------------------------------------------------------------

def _object_kind(obj):
    """How an object's damage counts: 'fts', 'index' (non-FTS index) or 'table'."""
    if obj is None:
        return "table"
    if obj["fts"]:
        return "fts"
    return "index" if obj["type"] == "index" else "table"


def attribute(lines, objs, owner_of=None):
    """Group integrity-check lines by the object they name: {object: {count, kind, table, samples}}.

    `owner_of(page) -> object name` resolves the page-only lines of older SQLite versions.
    """
    by_root = {}
    for o in objs.values():
        if o["rootpage"]:
            by_root[int(o["rootpage"])] = o
    by_root.setdefault(1, {"name": "sqlite_master", "type": "table", "tbl_name": "sqlite_master",
                           "role": "table", "fts": None, "rootpage": 1})
    groups = {}

    def add(name, kind, table, line):
        g = groups.setdefault(name, {"count": 0, "kind": kind, "table": table, "samples": []})
        g["count"] += 1
        if len(g["samples"]) < SAMPLES:
            g["samples"].append(line)

    if hasattr(owner_of, "want"):
        owner_of.want(int(m.group(1)) for m in (
            (_OLD_TREE_RE.match(line) or _PAGE_MSG_RE.match(line)) for line in lines
            if not (_TREE_RE.match(line) or _TREE_ONLY_RE.match(line))) if m)
    for line in lines:
        if line.startswith("*** in database"):
            continue
        m = _TREE_RE.match(line) or _TREE_ONLY_RE.match(line)
        if m:
            o = by_root.get(int(m.group(1)))
            if o is None:
                add("(tree %s)" % m.group(1), "table", None, line)
            else:
                add(o["name"], _object_kind(o), o["tbl_name"], line)
            continue
        m = _OLD_TREE_RE.match(line) or _PAGE_MSG_RE.match(line)
        if m:  # SQLite < 3.43 names the page, not the tree: map it through the page walk
            name = owner_of(int(m.group(1))) if owner_of else None
            o = objs.get(name) if name else None
            if o is None:
                add("(page %s, tree unknown)" % m.group(1), "table", None, line)
            else:
                add(o["name"], _object_kind(o), o["tbl_name"], line)
            continue
        hit = False
        for rx in _INDEX_MSG_RES:
            m = rx.match(line)
            if m:
                o = objs.get(m.group(1))
                add(m.group(1), _object_kind(o) if o else "index", o["tbl_name"] if o else None, line)
                hit = True
                break
        if hit:
            continue
        m = _TABLE_COL_RE.match(line) or _CHECK_RE.match(line)
        if m:
            tname = m.group(2) if m.re is _TABLE_COL_RE else m.group(1)
            o = objs.get(tname)
            # A NOT NULL / CHECK violation is a row-level fault even inside FTS shadow tables.
            add(tname, "constraint" if (o is None or not o["fts"]) else "fts", tname, line)
            continue
        m = _FTS_MSG_RE.search(line)
        if m and m.group(1) in objs:
            o = objs[m.group(1)]
            add(o["name"], _object_kind(o), o["tbl_name"], line)
            continue
        low = line.lower()
        if "never used" in low:
            add("(unreferenced pages)", "orphan", None, line)
        elif "freelist" in low:
            add("(freelist)", "table", None, line)
        else:
            add("(unattributed)", "table", None, line)
    return groups


def run_integrity(conn, objs, pragma, max_errors, table=None, owner_of=None):
    """PRAGMA quick_check/integrity_check with a cap; {"ok", "error_count", "capped", "aborted", "by_object", "lines"}."""
    arg = audit_fts.qi(table) if table else str(int(max_errors))
    out = {"check": pragma, "max_errors": None if table else int(max_errors), "ok": False, "error_count": 0,
           "capped": False, "aborted": None, "by_object": {}, "lines": []}
    try:
        rows = [r[0] for r in conn.execute("PRAGMA %s(%s)" % (pragma, arg))]
    except sqlite3.Error as exc:
        out["aborted"] = "%s: %s" % (type(exc).__name__, exc)
        return out
    if rows == ["ok"]:
        out["ok"] = True
        return out
    lines = []
    for r in rows:
        lines.extend(str(r).splitlines())
    errs = [l for l in lines if not l.startswith("*** in database")]
    out["error_count"] = len(errs)
    out["capped"] = (not table) and len(rows) >= int(max_errors)
    groups = attribute(errs, objs, owner_of)
    orphans = groups.pop("(unreferenced pages)", None)
    out["unreferenced_pages"] = orphans["count"] if orphans else 0
    out["by_object"] = groups
    out["lines"] = errs[:KEEP_LINES]
    return out


def integrity_fallback(conn, objs, pragma, owner_of=None):
    """When the whole-file check aborts: check each real table alone to localise the damage.

    PRAGMA quick_check(TABLE) needs SQLite 3.33+ and stops at 100 errors per table, so the
    counts are lower bounds; page accounting (unused pages) is not covered.
    """
    if sqlite3.sqlite_version_info < (3, 33, 0):
        return {"done": False, "reason": "SQLite %s has no per-table check" % sqlite3.sqlite_version}
    out = {"done": True, "tables": {}, "by_object": {}}
    for o in objs.values():
        if o["type"] != "table" or not o["rootpage"]:
            continue
        res = run_integrity(conn, objs, pragma, 100, table=o["name"], owner_of=owner_of)
        out["tables"][o["name"]] = "ok" if res["ok"] else (res["aborted"] or "%d errors" % res["error_count"])
        for name, g in res["by_object"].items():
            out["by_object"].setdefault(name, g)
        if res["aborted"]:
            g = out["by_object"].setdefault(o["name"], {"count": 0, "kind": _object_kind(o), "table": o["tbl_name"],
                                                        "samples": []})
            g["count"] += 1
            g["aborted"] = True
            g["samples"].append("check of %s aborted: %s" % (o["name"], res["aborted"]))
    return out


# --- index honesty ----------------------------------------------------------------------------

def _partial_where(sql):
    m = re.search(r"\)\s*WHERE\s+(.*)$", sql or "", re.I | re.S)
    return m.group(1).strip().rstrip(";") if m else None


def index_honesty(conn, objs):
    """Per base table: count(*) vs count(*) NOT INDEXED vs distinct keys of a table scan, and per index its entries."""
    return dict((o["name"], table_honesty(conn, o, objs)) for o in sorted(_base_tables(objs), key=lambda x: x["name"]))


def table_honesty(conn, o, objs):
    """One base table's honesty figures; every query in the caller's one read transaction."""
    t = o["name"]
    q = audit_fts.qi(t)
    rec = {"count": None, "count_scan": None, "distinct_rowid": None, "distinct_pk": None,
           "duplicates": 0, "indexes": {}, "errors": []}
    without_rowid = bool(re.search(r"\bWITHOUT\s+ROWID\b", o["sql"], re.I))
    table_side = {}
    try:
        rec["count"] = audit_fts.count(conn, "SELECT count(*) FROM %s" % q)
        rec["count_scan"] = audit_fts.count(conn, "SELECT count(*) FROM %s NOT INDEXED" % q)
        pk = [r[1] for r in sorted(conn.execute("PRAGMA table_info(%s)" % q).fetchall(), key=lambda r: r[5])
              if r[5]]
        if not without_rowid:
            # the distinct rowids of a table scan are also every full index's expected fingerprint:
            # one scan for both
            table_side[""] = _fingerprint(conn, q, "", rowid=True)
            rec["distinct_rowid"] = table_side[""][0]
        if pk and not (len(pk) == 1 and not without_rowid and _is_integer_pk(conn, t, pk[0])):
            cols = ", ".join("+" + audit_fts.qi(c) for c in pk)  # unary +: the planner may not assume uniqueness
            rec["distinct_pk"] = audit_fts.count(conn, "SELECT count(*) FROM (SELECT DISTINCT %s FROM %s NOT INDEXED)"
                                        % (cols, q))
        distinct = [d for d in (rec["distinct_rowid"], rec["distinct_pk"]) if d is not None]
        if distinct:
            rec["duplicates"] = max(0, rec["count_scan"] - min(distinct))
    except sqlite3.Error as exc:
        rec["errors"].append("%s: %s" % (type(exc).__name__, exc))
        return rec
    for idx in conn.execute("PRAGMA index_list(%s)" % q).fetchall():
        iname, partial = idx[1], (idx[4] if len(idx) > 4 else 0)
        if without_rowid and idx[3] == "pk":
            continue  # the table b-tree itself
        io = objs.get(iname, {})
        where = _partial_where(io.get("sql")) if partial else None
        w = (" WHERE %s" % where) if where else ""
        try:
            if w not in table_side:
                table_side[w] = _fingerprint(conn, q, w, rowid=not without_rowid)
            expected = table_side[w]
            entries = _fingerprint(conn, q, w, indexed_by=iname, rowid=not without_rowid)
            rec["indexes"][iname] = {"entries": entries[0], "expected": expected[0],
                                     "rowid_sum_ok": entries[1] == expected[1],
                                     "ok": entries == expected}
        except sqlite3.Error as exc:
            rec["indexes"][iname] = {"entries": None, "expected": None, "ok": None,
                                     "error": "%s: %s" % (type(exc).__name__, exc)}
    return rec


def _fingerprint(conn, table_sql, where, indexed_by=None, rowid=True):
    """(rows, sum of rowids) seen through an index or a table scan.

    An index whose entries point at the wrong rows fails even when the counts agree; the
    table side counts distinct rowids, so a duplicated cell is judged as structural, not
    blamed on every index.
    """
    src = "%s INDEXED BY %s" % (table_sql, audit_fts.qi(indexed_by)) if indexed_by else "%s NOT INDEXED" % table_sql
    if not rowid:
        return (audit_fts.count(conn, "SELECT count(*) FROM %s%s" % (src, where)), None)
    # rowid+0: SQLite knows rowid is unique and would drop a DISTINCT on it (a duplicated cell has one rowid)
    inner = "SELECT %srowid+0 AS r FROM %s%s" % ("" if indexed_by else "DISTINCT ", src, where)
    try:
        return tuple(conn.execute("SELECT count(*), sum(r) FROM (%s)" % inner).fetchone())
    except sqlite3.OperationalError as exc:
        if "overflow" not in str(exc):
            raise
        return (audit_fts.count(conn, "SELECT count(*) FROM (%s)" % inner), None)


def _is_integer_pk(conn, table, col):
    """An INTEGER PRIMARY KEY column is the rowid itself: no separate distinct check needed."""
    for r in conn.execute("PRAGMA table_info(%s)" % audit_fts.qi(table)).fetchall():
        if r[1] == col:
            return (r[2] or "").strip().upper() == "INTEGER"
    return False


# --- foreign keys -----------------------------------------------------------------------------

def foreign_keys(conn, honesty, limit=100000):
    """PRAGMA foreign_key_check counted by child table; violations whose parent has a damaged index are unreliable."""
    out = {"violations": 0, "by_table": {}, "unreliable": 0, "samples": [], "error": None}
    bad_parents = set(t for t, r in honesty.items()
                      if r["errors"] or any(i.get("ok") is False for i in r["indexes"].values()))
    try:
        cur = conn.execute("PRAGMA foreign_key_check")
        for n, row in enumerate(cur):
            if n >= limit:
                out["capped"] = True
                break
            table, rowid, parent = row[0], row[1], row[2]
            if parent in bad_parents:
                out["unreliable"] += 1
                continue
            out["violations"] += 1
            out["by_table"][table] = out["by_table"].get(table, 0) + 1
            if len(out["samples"]) < SAMPLES:
                out["samples"].append({"table": table, "rowid": rowid, "parent": parent})
    except sqlite3.Error as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    return out


# --- host tooling -----------------------------------------------------------------------------

def host_tooling():
    """What this host's python/sqlite can do: FTS5, trigram, a sqlite3 shell and whether its .recover works."""
    out = {"python": "%d.%d.%d" % sys.version_info[:3], "python_executable": sys.executable,
           "sqlite_version": sqlite3.sqlite_version, "fts5": False, "trigram": False, "dbstat": False,
           "sqlite3_shell": None, "shell_version": None, "recover": None, "notes": []}
    mem = sqlite3.connect(":memory:")
    try:
        for key, sql in (("fts5", "CREATE VIRTUAL TABLE f USING fts5(x)"),
                         ("trigram", "CREATE VIRTUAL TABLE g USING fts5(x, tokenize='trigram')"),
                         ("dbstat", "SELECT count(*) FROM dbstat")):
            try:
                mem.execute(sql).fetchall()
                out[key] = True
            except sqlite3.Error:
                pass
    finally:
        mem.close()
    if not out["fts5"]:
        out["notes"].append("no FTS5 in this python's SQLite: FTS tables cannot be checked")
    elif not out["trigram"]:
        out["notes"].append("no trigram tokenizer (SQLite %s < 3.34): trigram FTS tables cannot be opened"
                            % sqlite3.sqlite_version)
    shell = shutil.which("sqlite3")
    out["sqlite3_shell"] = shell
    if shell is None:
        out["recover"] = "no sqlite3 shell"
        out["notes"].append("no sqlite3 shell on the host")
        return out
    tmp = tempfile.mkdtemp(prefix="fleetops-audit-")
    try:
        try:
            v = subprocess.run([shell, "-version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
            out["shell_version"] = v.stdout.decode("utf-8", "replace").split(" ")[0].strip() or None
        except (OSError, subprocess.SubprocessError) as exc:
            out["shell_version"] = None
            out["notes"].append("sqlite3 -version failed: %s" % exc)
        tiny = os.path.join(tmp, "tiny.db")
        c = sqlite3.connect(tiny)
        c.execute("CREATE TABLE probe(x TEXT)")
        c.execute("INSERT INTO probe VALUES ('fleetops-recover-marker')")
        c.commit()
        c.close()
        try:
            r = subprocess.run([shell, tiny, ".recover"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=30, cwd=tmp)
            text = r.stdout.decode("utf-8", "replace")
            if r.returncode == 0 and "fleetops-recover-marker" in text:
                out["recover"] = "works"
            else:
                err = (r.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[0]
                out["recover"] = "fails: %s" % err[:200]
                out["notes"].append("sqlite3 .recover does not work here (%s)" % err[:120])
        except (OSError, subprocess.SubprocessError) as exc:
            out["recover"] = "fails: %s" % exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


# --- services ---------------------------------------------------------------------------------

def services():
    """systemd user manager: does it answer, and the hermes* units it knows."""
    out = {"user_manager": None, "detail": None, "units": {}}
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        out["user_manager"] = "no systemctl"
        return out
    env = dict(os.environ)
    run_dir = "/run/user/%d" % os.getuid()
    if not env.get("XDG_RUNTIME_DIR") and os.path.isdir(run_dir):
        env["XDG_RUNTIME_DIR"] = run_dir
    base = [systemctl, "--user", "--no-pager", "--no-legend", "--plain"]
    try:
        r = subprocess.run(base + ["list-units", "--all", "hermes*"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=15, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        out["user_manager"] = "not answering"
        out["detail"] = str(exc)
        return out
    if r.returncode != 0:
        out["user_manager"] = "not answering"
        out["detail"] = (r.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[0][:200]
        return out
    out["user_manager"] = "answering"
    for line in r.stdout.decode("utf-8", "replace").splitlines():
        parts = line.split(None, 4)
        if len(parts) >= 4:
            out["units"][parts[0]] = {"load": parts[1], "active": parts[2], "sub": parts[3], "enabled": None}
    try:
        r = subprocess.run(base + ["list-unit-files", "hermes*"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=15, env=env)
        for line in r.stdout.decode("utf-8", "replace").splitlines():
            parts = line.split()
            if len(parts) >= 2:
                u = out["units"].setdefault(parts[0], {"load": None, "active": "inactive", "sub": None})
                u["enabled"] = parts[1]
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def gateway_pid(home):
    """gateway.pid (JSON) pointing at a live gateway, a stale pid, or a reused one."""
    path = os.path.join(home, "gateway.pid")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return None
    try:
        data = json.loads(text)
        pid = int(data["pid"]) if isinstance(data, dict) else int(data)
    except (ValueError, KeyError, TypeError):
        try:
            pid, data = int(text.strip()), {}
        except ValueError:
            return {"pid": None, "state": "unreadable pid file"}
    info = hermes_holders.process_info(pid)
    out = {"pid": pid, "state": None}
    if info is None or info["state"] == "Z":
        out["state"] = "stale (no such process)"
    elif isinstance(data, dict) and data.get("start_time") not in (None, info["start_time"]):
        out["state"] = "stale (pid reused by %s)" % (" ".join(info["cmdline"])[:80] or "?")
    else:
        kind = hermes_holders.classify(info["cmdline"])
        out["state"] = "live" if kind == "gateway" else "live (pid is a %s process)" % kind
    state_file = os.path.join(home, "gateway_state.json")
    try:
        with open(state_file, encoding="utf-8") as f:
            out["gateway_state_says"] = json.load(f).get("gateway_state")
    except (OSError, ValueError, AttributeError):
        pass
    return out


# --- backups ----------------------------------------------------------------------------------

def backups(home, db, profile, root, now, verify_sha256=False):
    """Newest verified backup and everything else backup-like beside state.db.

    Verified means a fleetops backup manifest with integrity "ok" whose file is still there
    (size, and sha256 when asked, matching). Hermes' own state-snapshots are consistent copies
    but never integrity-checked: listed, not counted as verified. Corrupt copies and
    retired-WAL captures are listed so nobody restores or deletes them blindly.
    """
    out = {"newest_verified": None, "newest_any": None, "items": [], "corrupt_copies": [],
           "retired_wal_captures": [], "problems": []}
    manifests = glob.glob(os.path.join(home, "fleetops", "backups", "*.json"))
    if home != root:
        manifests += [(m, True) for m in glob.glob(os.path.join(root, "fleetops", "backups", "*.json"))]
    for entry in manifests:
        mpath, filtered = (entry if isinstance(entry, tuple) else (entry, False))
        try:
            with open(mpath, encoding="utf-8") as f:
                m = json.load(f)
        except (OSError, ValueError) as exc:
            out["problems"].append("%s: unreadable manifest (%s)" % (mpath, exc))
            continue
        if not isinstance(m, dict):
            continue
        if filtered and m.get("profile") != profile and m.get("source") != db:
            continue
        bpath = m.get("path") or ""
        if bpath and not os.path.isabs(bpath):
            bpath = os.path.join(os.path.dirname(mpath), bpath)
        created = _parse_utc(m.get("created"))
        item = {"kind": "fleetops", "path": bpath, "manifest": mpath, "created": m.get("created"),
                "age_hours": round((now - created) / 3600.0, 2) if created else None,
                "integrity": m.get("integrity"), "verified": False, "why": None}
        st = _file_facts(bpath) if bpath else None
        if m.get("integrity") != "ok":
            item["why"] = "integrity %r" % m.get("integrity")
        elif st is None:
            item["why"] = "backup file missing"
        elif m.get("size") is not None and int(m.get("size")) != st["size"]:
            item["why"] = "size %d != manifest %s" % (st["size"], m.get("size"))
        elif created is None:
            item["why"] = "no created time"
        elif verify_sha256 and m.get("sha256") and sha256_file(bpath) != m.get("sha256"):
            item["why"] = "sha256 mismatch"
        else:
            item["verified"] = True
        out["items"].append(item)
    for mpath in glob.glob(os.path.join(home, "state-snapshots", "*", "manifest.json")):
        try:
            with open(mpath, encoding="utf-8") as f:
                m = json.load(f)
        except (OSError, ValueError):
            continue
        files = m.get("files") if isinstance(m, dict) else None
        if not isinstance(files, dict) or "state.db" not in files:
            continue
        snap_db = os.path.join(os.path.dirname(mpath), "state.db")
        st = _file_facts(snap_db)
        created = _parse_utc(m.get("timestamp") or m.get("id")) or (st["mtime"] if st else None)
        out["items"].append({"kind": "hermes-snapshot", "path": snap_db, "manifest": mpath,
                             "created": _iso(created) if created else None,
                             "age_hours": round((now - created) / 3600.0, 2) if created else None,
                             "verified": False, "why": "consistent copy, never integrity-checked"
                             if st and st["size"] == files["state.db"] else "snapshot file missing or size differs"})
    extra = [(p, "hermes-pre-update") for p in glob.glob(os.path.join(home, "backups", "pre-update-*.zip"))]
    extra += [(p, "pre-update-emergency") for p in glob.glob(db + ".pre-update-emergency-*.bak")]
    for p, kind in extra:
        st = _file_facts(p)
        if st:
            out["items"].append({"kind": kind, "path": p, "created": _iso(st["mtime"]),
                                 "age_hours": round((now - st["mtime"]) / 3600.0, 2), "verified": False,
                                 "why": "not integrity-checked"})
    for p in sorted(glob.glob(db + ".malformed-backup-*") + glob.glob(db + ".corrupt.*.bak")):
        if p.endswith(("-wal", "-shm")):
            continue
        st = _file_facts(p)
        if st:
            out["corrupt_copies"].append({"path": p, "size": st["size"], "mtime": _iso(st["mtime"])})
    for d in sorted(glob.glob(db + ".retired-wal-*")):
        out["retired_wal_captures"].append(hermes_persistence.retired_wal_capture(d))
    dated = [i for i in out["items"] if i.get("age_hours") is not None]
    ver = [i for i in dated if i["verified"]]
    if ver:
        out["newest_verified"] = min(ver, key=lambda i: i["age_hours"])
    if dated:
        out["newest_any"] = min(dated, key=lambda i: i["age_hours"])
    out["items"] = sorted(out["items"], key=lambda i: (i.get("age_hours") is None, i.get("age_hours")))[:20]
    return out


# --- one database -----------------------------------------------------------------------------

def _verdict(rec):
    """Classify from the gathered figures; fail closed when a check could not complete."""
    conds = []
    reasons = []
    integ = rec.get("integrity") or {}
    by_obj = integ.get("by_object") or {}
    kinds = {}
    for name, g in by_obj.items():
        kinds.setdefault(g["kind"], []).append(name)
    if rec["holders"] and rec["holders"].get("retired"):
        conds.append("retired_wal")
        reasons.append("a process holds a deleted (retired) WAL generation: stop it, do not repair")
    structural = []
    index = []
    fts = []
    for name in kinds.get("table", []) + kinds.get("constraint", []):
        structural.append("%s: %d integrity errors" % (name, by_obj[name]["count"]))
    if integ.get("unreferenced_pages") and not by_obj:
        # Pages cut off from a damaged tree are its consequence; alone they mean a lost subtree.
        structural.append("%d pages never used (no tree accounts for them)" % integ["unreferenced_pages"])
    for name in kinds.get("index", []):
        index.append("%s: %d integrity errors" % (name, by_obj[name]["count"]))
    for name in kinds.get("fts", []):
        fts.append("%s: %d integrity errors" % (name, by_obj[name]["count"]))
    if integ.get("aborted") and not (integ.get("fallback") or {}).get("done"):
        structural.append("integrity check aborted (%s) and could not be localised: %s"
                          % (integ["aborted"], (integ.get("fallback") or {}).get("reason")))
    for t, h in (rec.get("honesty") or {}).items():
        if h["errors"]:
            structural.append("%s: table scan failed: %s" % (t, h["errors"][0]))
        if h["duplicates"]:
            structural.append("%s: %d duplicated rows (%s physical, %s distinct)" % (
                t, h["duplicates"], h["count_scan"],
                min(d for d in (h["distinct_rowid"], h["distinct_pk"]) if d is not None)))
        for iname, i in h["indexes"].items():
            if i.get("ok") is False:
                index.append("%s: %s entries, table has %s" % (iname, i["entries"], i["expected"]))
        if h["count"] is not None and h["count_scan"] is not None and h["count"] != h["count_scan"] \
                and not any(i.get("ok") is False for i in h["indexes"].values()) and not h["duplicates"]:
            index.append("%s: count(*) %d but table scan %d" % (t, h["count"], h["count_scan"]))
    fk = rec.get("foreign_keys") or {}
    if fk.get("violations"):
        structural.append("%d foreign key violations (%s)" % (
            fk["violations"], ", ".join("%s %d" % kv for kv in sorted(fk["by_table"].items()))))
    for name, f in (rec.get("fts") or {}).items():
        for e in f.get("errors") or []:
            fts.append("%s: %s" % (name, e))
    if structural:
        conds.append("structural_corruption")
    if index:
        conds.append("index_damage")
    if fts:
        conds.append("fts_index_damage")
    reasons += structural + index + fts
    verdict = conds[0] if conds else "healthy"
    return verdict, conds, reasons


def _errors_by_object(rec):
    """{object: count} over every finding: integrity lines, duplicated rows, dishonest indexes, FK, FTS checks."""
    out = {}

    def add(name, n):
        out[name] = out.get(name, 0) + int(n)

    integ = rec.get("integrity") or {}
    for name, g in (integ.get("by_object") or {}).items():
        add(name, g["count"])
    for name, g in ((integ.get("fallback") or {}).get("by_object") or {}).items():
        if name not in (integ.get("by_object") or {}):
            add(name, g["count"])
    for t, h in (rec.get("honesty") or {}).items():
        if h["duplicates"]:
            add(t, h["duplicates"])
        if h["errors"]:
            add(t, len(h["errors"]))
        for iname, i in h["indexes"].items():
            if i.get("ok") is False and iname not in (integ.get("by_object") or {}):
                add(iname, abs((i["expected"] or 0) - (i["entries"] or 0)) or 1)
    for t, n in ((rec.get("foreign_keys") or {}).get("by_table") or {}).items():
        add(t, n)
    for name, f in (rec.get("fts") or {}).items():
        if f.get("errors") and name not in out and not any(
                n.startswith(name + "_") for n in out):
            add(name, len(f["errors"]))
    return out


class PageOwners(object):
    """owner_of(page) for attribute(): the b-tree walk runs once, on first need, and only as far
    as the pages the check's lines name (`want`)."""

    def __init__(self, db, header, objs, use_wal):
        self.args = (db, header, objs, use_wal)
        self.wanted = None
        self.map = None

    def want(self, pages):
        pages = set(pages)
        if self.wanted is None or not pages <= self.wanted:
            self.wanted = (self.wanted or set()) | pages
            self.map = None

    def __call__(self, pg):
        if self.map is None:
            try:
                self.map = page_owners(*self.args, wanted=self.wanted)
            except (OSError, ValueError, FormatError):
                self.map = {}
        return self.map.get(pg)


def integrity(conn, objs, pragma, max_errors, owner_of):
    """The whole-file check, localised table by table when it aborts."""
    integ = run_integrity(conn, objs, pragma, max_errors, owner_of=owner_of)
    if integ["aborted"]:
        # SQLite < 3.44 scans every table inside quick_check and gives up on the first
        # unreadable page, dropping every line it had: localise table by table instead.
        fb = integrity_fallback(conn, objs, pragma, owner_of)
        integ["fallback"] = {k: v for k, v in fb.items() if k != "by_object"}
        if fb.get("done"):
            integ["by_object"] = fb["by_object"]
            integ["error_count"] = sum(g["count"] for g in fb["by_object"].values())
            integ["partial"] = True
    return integ


def base_tables_fail(integ, honesty):
    """Why the base tables are already known damaged (the store is structurally corrupt
    whatever its FTS indexes hold), or None."""
    _, conds, reasons = _verdict({"integrity": integ, "honesty": honesty, "holders": None})
    return reasons[0] if "structural_corruption" in conds else None


def run_checks(rec, conn, connect, token, db, header, mode, objs, fts, tooling, opts):
    """Integrity, index honesty, foreign keys and FTS as units on `jobs` read-only connections
    (one: every unit on `conn`, in order, as one pass would run them), the integrity check on
    a connection of its own.

    Every connection reads one snapshot: `token` (sqlite_workers.commit_token) was taken before
    `conn` began reading; when a commit lands while the others open, they are closed and every
    check runs on `conn`. A statement that meets a corrupt page leaves its connection unable
    to create TEMP tables for the rest of its transaction, so each connection makes its
    fts5vocab tables before any check runs (and the integrity check, which meets corrupt pages
    first, has its connection to itself). The FTS units do not run, and their results are not
    reported, once the base tables are known damaged: a repair rebuilds every FTS index anyway.
    Each check's wall, CPU and bytes read go to rec["checks"]; what did not run, and why, to
    rec["skipped_checks"].
    """
    pragma = "integrity_check" if opts["deep"] else "quick_check"
    owner_of = PageOwners(db, header, objs, use_wal=(mode != "immutable"))
    bases = sorted(_base_tables(objs), key=lambda x: x["name"])
    jobs = sqlite_workers.jobs_for(opts["jobs"])
    conns, note, integ_conn = [conn], None, None
    try:
        integ_conn = connect()
        while len(conns) < jobs:
            conns.append(connect())
    except sqlite3.Error as exc:
        note = "only %d connection(s) opened (%s)" % (len(conns), audit_fts.failure(exc))
    if sqlite_workers.commit_token(db) != token:
        note = "a commit landed while the audit opened its connections: every check ran on one"
        for c in conns[1:] + [integ_conn]:
            if c is not None:
                c.close()
        conns, integ_conn = [conn], None
    U = sqlite_workers.Unit
    units = [U("integrity", "integrity", lambda w: integrity(integ_conn or w.conn, objs, pragma,
                                                             opts["quick_check_max"], owner_of))]
    units += [U("honesty:" + o["name"], "index_honesty", lambda w, o=o: table_honesty(w.conn, o, objs))
              for o in bases]
    phase1 = [u.name for u in units]
    honesty_units = units[1:]
    known = {}

    def base_failure():
        if "why" not in known:
            if any(u.figures is None for u in units[:len(phase1)]):
                return None                     # not known yet: the FTS unit runs
            known["why"] = base_tables_fail(units[0].result, dict(
                (u.name.split(":", 1)[1], u.result) for u in honesty_units))
        return known["why"]

    size = sum(((rec.get("files") or {}).get(k) or {}).get("size") or 0 for k in ("db", "wal"))
    walk_skipped = None
    if opts["budget_gb"] and not opts["deep"] and size > opts["budget_gb"] * 2 ** 30:
        walk_skipped = ("store is %.1f GB, over the audit budget of %g GB: FTS index walk not run "
                        "(--deep or a larger --budget runs it)" % (size / 2.0 ** 30, opts["budget_gb"]))
    records, fts_list = audit_fts.fts_units(objs, fts, tooling, walk_skipped, 1 if len(conns) == 1 else 4 * len(conns),
                                  skip=lambda: "base tables damaged" if base_failure() else None)
    units += fts_list
    units.append(U("foreign_keys", "foreign_keys", lambda w: foreign_keys(w.conn, dict(
        (u.name.split(":", 1)[1], u.result) for u in honesty_units)), deps=phase1[1:]))
    meter = sqlite_workers.Meter()
    try:
        by = sqlite_workers.run_units(units, conns, prepare=lambda w: audit_fts.fts_prepare(w, fts, records))
    finally:
        for c in conns[1:] + [integ_conn]:
            if c is not None:
                c.close()
    wall = meter.stop()["seconds"]
    rec["integrity"] = by["integrity"].result
    rec["honesty"] = dict((o["name"], by["honesty:" + o["name"]].result) for o in bases)
    rec["foreign_keys"] = by["foreign_keys"].result
    skipped = rec["skipped_checks"]
    why = base_failure()
    if why:
        for name, r in records.items():
            if r["checked"]:
                records[name] = dict(audit_fts.fts_record(fts[name]), skipped="base tables already damaged (%s): "
                                     "the FTS checks add nothing to the verdict" % why)
                skipped.append({"check": "fts:" + name, "reason": records[name]["skipped"]})
    else:
        audit_fts.fts_finish(records, fts, by)
        for name, r in records.items():
            if r.get("walk_skipped"):
                skipped.append({"check": "fts_walk:" + name, "reason": r["walk_skipped"]})
    rec["fts"] = records
    checks = rec["checks"]
    for u in units:
        if u.figures is not None:
            sqlite_workers.add_figures(checks.setdefault(u.check, {}), u.figures)
    rec["parallel"] = {"jobs": len(conns), "asked": jobs, "note": note, "checks_seconds": wall,
                       "workers_used": len(set(u.worker for u in units if u.worker is not None)),
                       "cache_kib_per_connection": int(opts["cache_kib"])}


def audit_db(entry, opts, tooling, now):
    """Every check on one state.db; never raises (a crash becomes the record's `error`)."""
    started = time.time()
    db = entry.get("db")
    rec = {"profile": entry.get("profile"), "home": entry.get("home"), "db": db, "verdict": None,
           "conditions": [], "reasons": [], "warnings": [], "errors_by_object": {}, "errors_total": 0,
           "files": None, "header": None, "open_mode": None, "sqlite": None, "integrity": None,
           "honesty": None, "foreign_keys": None, "fts": None, "fts_triggers": None, "holders": None,
           "gateway_pid": None, "service": None, "backups": None, "persistence": None, "journal": None,
           "checks": {}, "skipped_checks": [], "error": None}
    if entry.get("error"):
        rec["verdict"] = "missing"
        rec["reasons"] = [entry["error"]]
        return rec
    try:
        _audit_db(rec, db, entry, opts, tooling, now)
    except Exception as exc:  # the audit of one db must never take down the others
        rec["error"] = "%s: %s" % (type(exc).__name__, exc)
        rec["traceback"] = traceback.format_exc()[-2000:]
        if rec["verdict"] is None:
            rec["verdict"] = "unreadable"
            rec["reasons"].append("audit failed: %s" % rec["error"])
    try:
        hermes_persistence.apply(rec, entry, opts, now)
    except Exception as exc:  # evidence that cannot be read must not hide the file's verdict
        rec["warnings"].append({"code": "persistence_unchecked", "msg": "persistence evidence not read: %s: %s"
                                % (type(exc).__name__, exc)})
    rec.pop("_newest_message", None)
    rec["elapsed"] = round(time.time() - started, 3)
    return rec


def _audit_db(rec, db, entry, opts, tooling, now):
    home = entry["home"]
    files = {"db": _file_facts(db), "wal": _file_facts(db + "-wal"), "shm": _file_facts(db + "-shm")}
    free, total = _free_space(db)
    files["free_bytes"], files["fs_bytes"] = free, total
    rec["files"] = files
    if opts["holders"]:
        t0 = time.monotonic()
        rec["holders"] = hermes_holders.scan(db)  # before opening: the audit's own handle is excluded anyway
        rec["holders_seconds"] = round(time.monotonic() - t0, 4)   # bench/audit.py prints it
    if home and os.path.isdir(home):
        rec["gateway_pid"] = gateway_pid(home)
        rec["backups"] = backups(home, db, entry["profile"], opts["_root"], now, opts["backup_verify_sha256"])
    if files["db"] is None:
        rec["verdict"] = "missing"
        rec["reasons"].append("no %s" % db if not os.path.lexists(db) else "cannot stat %s" % db)
        if rec["holders"] and rec["holders"].get("retired"):
            rec["conditions"] = ["retired_wal"]
        _warnings(rec, opts, tooling)
        return
    denied = hermes_paths.access_problem(db)
    if denied:  # say so plainly, with owner and mode, instead of "cannot read"
        rec["verdict"] = "unreadable"
        rec["reasons"].append("permission denied: " + denied)
        _warnings(rec, opts, tooling)
        return
    header = read_header(db)
    rec["header"] = header
    if header["valid"]:
        rec["journal"] = hermes_journal.advice(header["journal_mode"])
    if not header["valid"]:
        rec["verdict"] = "unreadable"
        rec["reasons"].append(header["reason"])
        _warnings(rec, opts, tooling)
        return
    try:
        conn, mode, warns = open_readonly(db, header, opts["busy_timeout"])
        uri = conn_uri(db, mode)
        bound_memory(conn, opts)
    except sqlite3.Error as exc:
        rec["verdict"] = "unreadable"
        rec["reasons"].append("cannot open: %s: %s" % (type(exc).__name__, exc))
        _warnings(rec, opts, tooling)
        return
    rec["open_mode"] = mode
    rec["warnings"].extend(warns)
    try:
        token = sqlite_workers.commit_token(db)
        conn.execute("BEGIN")  # one read snapshot for every figure
        try:
            objs, fts = read_schema(conn)
        except sqlite3.Error as exc:
            rec["verdict"] = "unreadable"
            rec["reasons"].append("schema unreadable: %s: %s" % (type(exc).__name__, exc))
            _warnings(rec, opts, tooling)
            return
        sq = {"page_count": None, "freelist_count": None, "schema_version": None, "synchronous": None,
              "journal_mode": header["journal_mode"], "objects": len(objs)}
        for key in ("page_count", "freelist_count"):
            try:
                sq[key] = conn.execute("PRAGMA %s" % key).fetchone()[0]
            except sqlite3.Error:
                pass
        try:
            sq["synchronous"] = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(
                conn.execute("PRAGMA synchronous").fetchone()[0])
        except sqlite3.Error:
            pass
        if "schema_version" in objs:
            try:
                row = conn.execute("SELECT max(version) FROM schema_version NOT INDEXED").fetchone()
                sq["schema_version"] = row[0] if row else None
            except sqlite3.Error as exc:
                sq["schema_version"] = "unreadable: %s" % exc
        rec["sqlite"] = sq
        run_checks(rec, conn, lambda: _worker_connection(uri, opts), token, db, header, mode, objs, fts, tooling,
                   opts)
        rec["fts_triggers"] = sum(1 for o in objs.values() if o["type"] == "trigger"
                                  and any(o["name"].startswith(v) or v in o["sql"] for v in fts)) if fts else 0
        rec["_newest_message"] = hermes_persistence.newest_message(conn, objs)
    finally:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        conn.close()
    rec["verdict"], rec["conditions"], rec["reasons"] = _verdict(rec)
    rec["errors_by_object"] = _errors_by_object(rec)
    rec["errors_total"] = sum(rec["errors_by_object"].values())
    _warnings(rec, opts, tooling)


def _warnings(rec, opts, tooling):
    """Warnings never change the verdict: no recent verified backup, big WAL, unknown holders, low space."""
    w = rec["warnings"]
    files = rec.get("files") or {}
    if rec["holders"] and rec["holders"].get("retired") and "retired_wal" not in rec["conditions"]:
        rec["conditions"].insert(0, "retired_wal")
    if rec["verdict"] in ("healthy", "fts_index_damage", "index_damage", "structural_corruption") \
            and "retired_wal" in rec["conditions"]:
        rec["verdict"] = "retired_wal"
    if rec["verdict"] == "missing":
        return
    b = rec.get("backups") or {}
    nv = b.get("newest_verified")
    max_age = opts["backup_max_age_hours"]
    if nv is None:
        w.append({"code": "no_verified_backup", "msg": "no verified backup found"})
    elif nv["age_hours"] > max_age:
        w.append({"code": "no_verified_backup", "msg": "newest verified backup is %.1f h old (> %g h)"
                  % (nv["age_hours"], max_age)})
    wal = (files.get("wal") or {}).get("size") or 0
    if wal > opts["wal_warn_mb"] * 1024 * 1024:
        w.append({"code": "wal_large", "msg": "WAL is %.1f MB (> %g MB): a checkpoint is not keeping up"
                  % (wal / 1048576.0, opts["wal_warn_mb"])})
        if ((rec.get("sqlite") or {}).get("synchronous")) == "NORMAL":
            w.append({"code": "wal_sync_normal", "msg": "WAL with synchronous=NORMAL (this host's default): "
                      "the last %.1f MB of commits do not survive a power loss" % (wal / 1048576.0)})
    h = rec.get("holders")
    if h is not None and h.get("status") != "known":
        w.append({"code": "holders_unknown", "msg": "holders unknown: %s" % (h.get("reason") or "")})
    size = ((files.get("db") or {}).get("size") or 0) + wal
    free = files.get("free_bytes")
    if free is not None and size and free < 2 * size:
        w.append({"code": "low_free_space", "msg": "%.1f MB free, under twice the database (%.1f MB)"
                  % (free / 1048576.0, size / 1048576.0)})
    if (rec.get("journal") or {}).get("warning"):
        w.append({"code": "wal_reset_bug", "msg": rec["journal"]["warning"]})
    gp = rec.get("gateway_pid")
    if gp and gp.get("state", "").startswith("stale"):
        w.append({"code": "gateway_pid_stale", "msg": "gateway.pid: %s" % gp["state"]})
    for name, f in (rec.get("fts") or {}).items():
        if not f.get("checked") and f.get("reason"):
            w.append({"code": "fts_unchecked", "msg": "%s: %s" % (name, f["reason"])})


# --- entry point ------------------------------------------------------------------------------

def options(args):
    """Normalised options with defaults (playbook values arrive as strings after templating)."""
    args = args or {}
    o = dict(DEFAULTS)
    o["deep"] = _truthy(args.get("deep", False))
    o["quick_check_max"] = max(1, _num(args.get("quick_check_max"), DEFAULTS["quick_check_max"], int))
    o["backup_max_age_hours"] = _num(args.get("backup_max_age_hours"), DEFAULTS["backup_max_age_hours"])
    o["wal_warn_mb"] = _num(args.get("wal_warn_mb"), DEFAULTS["wal_warn_mb"])
    o["busy_timeout"] = _num(args.get("busy_timeout"), DEFAULTS["busy_timeout"])
    o["evidence_days"] = max(0.0, _num(args.get("evidence_days"), DEFAULTS["evidence_days"]))
    o["log_tail_bytes"] = max(4096, _num(args.get("log_tail_bytes"), DEFAULTS["log_tail_bytes"], int))
    o["stale_hours"] = _num(args.get("stale_hours"), DEFAULTS["stale_hours"])
    o["jobs"] = max(0, _num(args.get("jobs"), DEFAULTS["jobs"], int))
    o["budget_gb"] = max(0.0, _num(args.get("budget_gb"), DEFAULTS["budget_gb"]))
    o["cache_kib"] = max(512, _num(args.get("cache_kib"), DEFAULTS["cache_kib"], int))
    o["_check"] = _truthy(args.get("_check", False))
    for key in ("holders", "services", "tooling", "backup_verify_sha256", "write_probe"):
        if key in args and args[key] is not None and args[key] != "":
            o[key] = _truthy(args[key])
    return o


def worst(verdicts):
    verdicts = list(verdicts)
    return max(verdicts, key=lambda v: SEVERITY.get(v, 6)) if verdicts else None


def main(args):
    """Audit every profile's state.db (or `db_path` alone); the module contract plus the figures."""
    args = args or {}
    opts = options(args)
    now = time.time()
    try:
        if args.get("db_path"):
            found = hermes_paths.single(args["db_path"])
        else:
            found = hermes_paths.discover(args.get("hermes_home") or None, args.get("hermes_profiles") or None)
        opts["_root"] = found["root"]
        tooling = host_tooling() if opts["tooling"] else {"sqlite_version": sqlite3.sqlite_version,
                                                          "fts5": True, "trigram": True, "skipped": True}
        svc = services() if opts["services"] and not args.get("db_path") else None
        dbs = []
        for entry in found["profiles"]:
            rec = audit_db(entry, opts, tooling, now)
            if svc is not None and entry.get("profile") not in (None, "-"):
                unit = "hermes-gateway.service" if entry["profile"] == "default" \
                    else "hermes-gateway-%s.service" % entry["profile"]
                rec["service"] = dict(svc["units"].get(unit) or {"active": "absent"}, unit=unit)
            dbs.append(rec)
    except Exception as exc:
        return {"changed": False, "failed": True, "skipped": False,
                "msg": "audit failed: %s: %s" % (type(exc).__name__, exc), "traceback": traceback.format_exc()[-4000:]}
    counts = {}
    for r in dbs:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    msg = "%d database(s): %s" % (len(dbs), ", ".join("%d %s" % (n, v) for v, n in
                                                     sorted(counts.items(), key=lambda kv: -SEVERITY.get(kv[0], 6))))
    return {"changed": False, "failed": False, "skipped": False, "msg": msg,
            "audit_version": AUDIT_VERSION, "hermes_root": found["root"],
            "active_profile": found.get("active_profile"),
            "host_tooling": tooling, "services": svc, "databases": dbs,
            "worst": worst(r["verdict"] for r in dbs),
            "healthy": all(r["verdict"] == "healthy" for r in dbs) and bool(dbs),
            "audited_at": _iso(now)}
