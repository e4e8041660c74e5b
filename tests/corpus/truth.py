"""Ground truth of a HEALTHY database: every row of every base table, and which page holds it.

Why: the audit and salvage tests need exact expectations ("these 37 messages are on the
destroyed pages, everything else must come back unchanged"), computed independently of the
code under test: rows with stdlib sqlite3 on the healthy source, pages with pagefile.py.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Dict, List, Set

from . import pagefile

FTS_SHADOW_SUFFIXES = ("_data", "_idx", "_content", "_docsize", "_config")


def _connect_ro(path, ignore_wal: bool = False) -> sqlite3.Connection:
    # mode=ro (not immutable) so a committed WAL beside the file is part of the image;
    # immutable=1 reads the main file alone, as if no WAL existed
    extra = "&immutable=1" if ignore_wal else ""
    return sqlite3.connect(f"file:{Path(path)}?mode=ro{extra}", uri=True)


def base_tables(path) -> List[str]:
    """Ordinary tables: no sqlite_* internals, no virtual (FTS) tables, no FTS shadow tables."""
    objs = pagefile.schema_objects(path)
    virtual = {name for typ, name, _t, _r, sql in objs
               if typ == "table" and sql and sql.upper().startswith("CREATE VIRTUAL TABLE")}
    shadow = {v + s for v in virtual for s in FTS_SHADOW_SUFFIXES}
    return [name for typ, name, _t, _r, sql in objs
            if typ == "table" and not name.startswith("sqlite_")
            and name not in virtual and name not in shadow]


def fts_tables(path) -> List[str]:
    return [name for typ, name, _t, _r, sql in pagefile.schema_objects(path)
            if typ == "table" and sql and sql.upper().startswith("CREATE VIRTUAL TABLE")]


def ground_truth(path, ignore_wal: bool = False) -> Dict:
    """{"schema": [(type, name, tbl_name, sql)], "tables": {t: {"rows": {rowid: tuple}, "count": n,
    "columns": [...]}}} of a healthy database (table scans, never an index)."""
    con = _connect_ro(path, ignore_wal)
    try:
        schema = [tuple(r) for r in con.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY rowid")]
        tables = {}
        for t in base_tables(path):
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')]
            rows = {r[0]: tuple(r[1:]) for r in con.execute(
                f'SELECT rowid, * FROM "{t}" NOT INDEXED ORDER BY rowid')}
            tables[t] = {"rows": rows, "count": len(rows), "columns": cols}
        return {"schema": schema, "tables": tables}
    finally:
        con.close()


def rowids(truth: Dict) -> Dict[str, Set[int]]:
    """table -> set of rowids of a ground_truth() result."""
    return {t: set(v["rows"]) for t, v in truth["tables"].items()}


def rows_on_pages(path, table: str) -> Dict[int, List[int]]:
    """leaf page -> rowids on it, for ``table`` walked from its root with pagefile (main file only)."""
    root = pagefile.root_pages(path)[table]
    out: Dict[int, List[int]] = {}
    with pagefile.PageFile(path) as pf:
        _, leaves = pf.walk(root)
        for pg in leaves:
            page = pf.parse_page(pg)
            out[pg] = [c.rowid for c in pf.cells(page)]
    return out


def rows_under(path, interior_page: int) -> List[int]:
    """Rowids in the subtree of one interior table page."""
    with pagefile.PageFile(path) as pf:
        _, leaves = pf.walk(interior_page)
        return [c.rowid for pg in leaves for c in pf.cells(pf.parse_page(pg))]


def freelist_rows(path) -> Dict[int, List[int]]:
    """Freelist page -> rowids of table-leaf cells still readable on it (deleted data).

    A freed page keeps its old bytes unless secure_delete zeroed it; pages whose first byte
    still says "table leaf" and whose cells parse are reported.
    """
    out: Dict[int, List[int]] = {}
    with pagefile.PageFile(path) as pf:
        trunks, leaves = pf.freelist()
        for pg in leaves:
            data = pf.read_page(pg)
            if data[0] != pagefile.LEAF_TABLE:
                continue
            try:
                page = pf.parse_page(pg, data)
                ids = [c.rowid for c in pf.cells(page)]
            except (ValueError, IndexError):
                continue
            if ids:
                out[pg] = ids
    return out


def freelist_records(path, ncols: int) -> Dict[int, List[int]]:
    """Like freelist_rows, but only cells whose local record has ``ncols`` columns (shape match)."""
    out: Dict[int, List[int]] = {}
    with pagefile.PageFile(path) as pf:
        _, leaves = pf.freelist()
        for pg in leaves:
            data = pf.read_page(pg)
            if data[0] != pagefile.LEAF_TABLE:
                continue
            try:
                page = pf.parse_page(pg, data)
                for c in pf.cells(page):
                    _hl, _n, cols = pagefile.record_header(c.payload)
                    if len(cols) == ncols:
                        out.setdefault(pg, []).append(c.rowid)
            except (ValueError, IndexError):
                continue
    return out
