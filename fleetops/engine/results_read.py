"""Reading the results store for reports: one small interface over either backend.

A reader offers `execute(sql, params)` (the store's SQLite dialect with qmark placeholders,
which the PostgreSQL connection translates; portable SQL only: SELECT, GROUP BY, IN) returning
a DB-API cursor, `has_table(name)`, `evidence_dir(run_id, host)` and `close()`. That is the
duck type of a `sqlite3.Connection`, so code that already queries the store (the audit and
repair readers) takes a reader unchanged. A SQLite store is opened read-only: building a
report never writes to it or takes its write lock.
"""
from __future__ import annotations

import os
from typing import Any
from pathlib import Path

from fleetops.engine import results_backend as _backend
from fleetops.engine.results import DB_NAME, host_dir_path


class StoreReader:
    """Read-only view of `<results_dir>/runs.db`, or of the PostgreSQL store at `db_url`."""

    def __init__(self, results_dir: str | os.PathLike, db_url: str | None = None):
        self.results_dir = Path(results_dir)
        self.location = _backend.redact(db_url) if db_url else str(self.results_dir / DB_NAME)
        if db_url:
            self._conn: Any = _backend.PgConnection(db_url)
        else:
            path = self.results_dir / DB_NAME
            if not path.exists():
                raise FileNotFoundError(2, "no results store here (no run recorded yet)", str(path))
            self._conn = _backend.open_sqlite(path, readonly=True)

    def execute(self, sql: str, params=()):
        return self._conn.execute(sql, tuple(params))

    def has_table(self, name: str) -> bool:
        return self._conn.execute("SELECT 1 FROM sqlite_master WHERE name=?", (name,)).fetchone() is not None

    def evidence_dir(self, run_id: str, host: str) -> Path:
        """Where the run's fetched files for a host are (the store's `host_dir` layout)."""
        return host_dir_path(self.results_dir, run_id, host)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_reader(results_dir: str | os.PathLike, db_url: str | None = None) -> StoreReader:
    """The reader for a `--results` value: a directory holding runs.db, or a postgresql:// URL."""
    return StoreReader(results_dir, db_url)


def dict_rows(reader, sql: str, params=()) -> list[dict]:
    """Rows as dicts keyed by column name (DB-API `cursor.description`, so any backend's cursor works)."""
    cur = reader.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, rec)) for rec in cur]
