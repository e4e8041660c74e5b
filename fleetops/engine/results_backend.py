"""Where the central results live: a SQLite file (the default) or a PostgreSQL database.

The store's SQL is written once, in SQLite's dialect, against a DB-API connection. A
PostgreSQL connection (psycopg 3) is wrapped so that the same statements run there:
placeholders `?` become `%s`; `BEGIN IMMEDIATE` becomes `BEGIN` (PostgreSQL's row locks do
what SQLite's write lock does); `PRAGMA` statements are SQLite's own and do nothing;
`INSERT OR REPLACE` / `INSERT OR IGNORE` become `INSERT ... ON CONFLICT (primary key) DO
UPDATE / DO NOTHING`; in `CREATE TABLE`, `REAL` becomes `DOUBLE PRECISION` (seconds since
1970 need more than float4), `INTEGER` becomes `BIGINT` (byte sizes pass 2^31) and
`INTEGER PRIMARY KEY` an identity column; and a `sqlite_master` view lists the tables and
indexes, so code asking SQLite's catalogue whether a table exists gets the same answer.
Rows support both `row[0]` and `row["name"]`, as `sqlite3.Row` does.

A URL's password never leaves this module: `redact()` is what may be shown or stored.
"""
from __future__ import annotations

import re
import sqlite3
import sys
import threading
import time
from typing import cast
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

BUSY_TIMEOUT_MS = 60_000
URL_SCHEMES = ("postgresql://", "postgres://")
CONNECT_TIMEOUT_S = 10


def is_url(value) -> bool:
    return isinstance(value, str) and value.startswith(URL_SCHEMES)


def redact(url: str) -> str:
    """The URL without its password (and without query parameters, which may hold one)."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def url_secrets(url: str) -> set:
    """Values of a URL that must never be printed: its password and its query's values."""
    parts = urlsplit(url)
    out = {parts.password} if parts.password else set()
    for pair in parts.query.split("&"):
        _, _, value = pair.partition("=")
        if value:
            out.add(value)
    return out


def store_errors() -> tuple:
    """Exception classes a store operation may raise, whichever backend is in use (psycopg's
    only once a PostgreSQL store imported it: a SQLite run never pays for importing it)."""
    psycopg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if psycopg is None else (sqlite3.Error, psycopg.Error)


# --- SQLite -----------------------------------------------------------------------------------

def open_sqlite(path: Path, readonly: bool = False) -> sqlite3.Connection:
    """runs.db with the store's settings: autocommit (explicit BEGIN), WAL, a long busy timeout."""
    if readonly:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_MS / 1000,
                               isolation_level=None, check_same_thread=False)
    else:
        conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000,
                               isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    if not readonly:
        for _ in range(50):
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:   # another process is switching it right now
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                time.sleep(0.1)
        conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


# --- PostgreSQL -------------------------------------------------------------------------------

class Row(tuple):
    """A result row readable by position and by column name, like sqlite3.Row."""

    __slots__ = ()
    _names: tuple = ()

    def keys(self):
        return list(self._names)

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)


def _row_factory(cursor):
    names = tuple(d.name for d in cursor.description or ())
    cls = type("Row", (Row,), {"_names": names, "__slots__": ()})
    return lambda values: cls(values)


_SQLITE_MASTER = """
CREATE OR REPLACE VIEW sqlite_master AS
    SELECT 'table'::text AS type, table_name::text AS name, table_name::text AS tbl_name, NULL::text AS sql
      FROM information_schema.tables
     WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
    UNION ALL
    SELECT 'index'::text, indexname::text, tablename::text, indexdef::text
      FROM pg_indexes WHERE schemaname = current_schema()
"""
_SCHEMA_LOCK_KEY = 0x666c6565746f7073   # "fleetops": serialises schema changes across controllers
_INSERT_OR = re.compile(r"^\s*INSERT\s+OR\s+(REPLACE|IGNORE)\s+INTO\s+(\w+)\s*(\(([^)]*)\))?", re.I | re.S)


class PgConnection:
    """A psycopg connection that takes the store's SQLite-dialect statements (see the module)."""

    def __init__(self, url: str):
        try:
            import psycopg
        except ImportError:
            raise OSError(0, "a PostgreSQL results store needs psycopg: pip install 'fleetops[postgresql]'",
                          redact(url)) from None
        try:
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.Error as exc:
            msg = " ".join(str(exc).split())
            for s in url_secrets(url):
                msg = msg.replace(s, "********")
            raise OSError(0, f"cannot connect: {msg}", redact(url)) from None
        self._keys: dict = {}
        self._lock = threading.RLock()

    # -- the dialect --

    def _conflict_keys(self, table: str) -> tuple:
        """(primary-key columns, all columns in order) of a table, read once from the catalogue."""
        if table not in self._keys:
            cur = self._conn.execute(
                "SELECT a.attname, a.attnum, coalesce(a.attnum = ANY(i.indkey), false)"
                "  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                "  LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary"
                " WHERE c.relname = %s AND c.relnamespace = current_schema()::regnamespace"
                "   AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum", (table,))
            rows = cur.fetchall()
            self._keys[table] = (tuple(r[0] for r in rows if r[2]), tuple(r[0] for r in rows))
        return self._keys[table]

    def translate(self, sql: str) -> str | None:
        """The PostgreSQL form of one SQLite-dialect statement (None: nothing to run)."""
        head = sql.lstrip().upper()
        if head.startswith("PRAGMA"):
            return None
        if head.startswith("BEGIN"):
            return "BEGIN"
        if head.startswith("CREATE TABLE"):
            sql = re.sub(r"\bINTEGER\s+PRIMARY\s+KEY\b", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
                         sql, flags=re.I)
            sql = re.sub(r"\bINTEGER\b", "BIGINT", sql, flags=re.I)
            sql = re.sub(r"\bREAL\b", "DOUBLE PRECISION", sql, flags=re.I)
            sql = re.sub(r"\bBLOB\b", "BYTEA", sql, flags=re.I)
        m = _INSERT_OR.match(sql)
        if m:
            how, table, cols = m.group(1).upper(), m.group(2), m.group(4)
            pk, every = self._conflict_keys(table)
            sql = f"INSERT INTO {table}" + (f" ({cols})" if cols else "") + " " + sql[m.end():].lstrip()
            if how == "IGNORE" or not pk:
                sql += " ON CONFLICT DO NOTHING"
            else:
                names = [c.strip() for c in cols.split(",")] if cols else list(every)
                rest = [c for c in names if c not in pk]
                sql += f" ON CONFLICT ({', '.join(pk)}) DO " + (
                    "UPDATE SET " + ", ".join(f"{c} = EXCLUDED.{c}" for c in rest) if rest else "NOTHING")
        return sql.replace("%", "%%").replace("?", "%s")

    # -- the DB-API surface the store uses --

    def execute(self, sql: str, params=()):
        with self._lock:
            pg = self.translate(sql)
            cur = self._conn.cursor(row_factory=_row_factory)
            if pg is not None:
                cur.execute(pg, tuple(params) if params else None)
            return cur

    def executemany(self, sql: str, seq):
        with self._lock:
            cur = self._conn.cursor(row_factory=_row_factory)
            cur.executemany(cast(str, self.translate(sql)), [tuple(p) for p in seq])
            return cur

    def prepare_schema(self) -> None:
        """Inside the schema transaction: one controller at a time, and the catalogue view."""
        self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
        self._conn.execute(_SQLITE_MASTER)

    def close(self) -> None:
        self._conn.close()
