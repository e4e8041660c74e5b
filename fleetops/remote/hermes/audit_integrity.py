"""SQLite's own checks (quick_check / integrity_check, foreign_key_check) and which object each
line of theirs blames.

quick_check must get a large N: the default cap of 100 hid structural damage behind FTS errors.
SQLite < 3.43 names a damaged page, not its tree, so page_owners walks the b-trees to say whose
page it is; when the whole-file check aborts, each table is checked alone to localise the damage.
"""
from __future__ import annotations

import re
import sqlite3
from typing import Any, Callable, Dict, Iterable, List, Optional, Set

from fleetops.remote.hermes import audit_fts
from fleetops.remote.hermes.audit_schema import Obj, Objs
from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.reader import SQLiteFile
from fleetops.remote.sqlite.fileformat.wal import parse_wal
from fleetops.remote.sqlite.pins import Pins

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
Groups = Dict[str, Dict[str, Any]]     # check lines by the object they blame: {count, kind, table, samples}
OwnerOf = Callable[[int], Optional[str]]     # a page's b-tree (PageOwners)


def page_owners(pins: Pins, header: Dict[str, Any], objs: Objs, use_wal: bool,
                wanted: Optional[Iterable[int]] = None) -> Dict[int, str]:
    """{page number: object name} for the pages reachable from each root (interior, leaf, and the
    damaged ones a parent points at), by the shared format reader; with `wanted`, the walk
    stops once every wanted page is placed and only those are kept.

    Only used to say which b-tree a page named by the integrity check belongs to. The files are
    read through `pins` (sqlite/pins: never an open()/close() beside live connections). With
    `use_wal` the WAL's frames are laid over the main file up to its last commit whose
    cumulative checksums hold, as SQLite itself would read them.
    """
    overlay: Dict[int, bytes] = {}
    db_pages = None
    wal = pins.read_all("-wal") if use_wal else None
    if wal:
        try:
            w = parse_wal(wal, header["page_size"])
            if not w.get("error"):
                overlay, db_pages = w["pages"], w["db_pages"]
        except FormatError:
            overlay = {}
    owners: Dict[int, str] = {}
    want = set(wanted) if wanted is not None else None
    with SQLiteFile(data=pins.mapped("") or b"", overlay=overlay, page_count=db_pages) as f:
        claimed: Dict[int, str] = {}
        for o in sorted(objs.values(), key=lambda x: x["rootpage"] or 0):
            root = o["rootpage"]
            if not root:
                continue
            walk = f.walk_btree(int(root), owner=o["name"], claimed=claimed)
            for pg in list(walk.pages) + list(walk.bad_pages):
                if want is None or pg in want:
                    owners.setdefault(pg, o["name"])
            if want is not None and want.issubset(owners):
                break
    return owners


def _object_kind(obj: Optional[Obj]) -> str:
    """How an object's damage counts: 'fts', 'index' (non-FTS index) or 'table'."""
    if obj is None:
        return "table"
    if obj["fts"]:
        return "fts"
    return "index" if obj["type"] == "index" else "table"


def attribute(lines: List[str], objs: Objs, owner_of: Optional[OwnerOf] = None) -> Groups:
    """Group integrity-check lines by the object they name: {object: {count, kind, table, samples}}.

    `owner_of(page) -> object name` resolves the page-only lines of older SQLite versions.
    """
    by_root: Dict[int, Obj] = {}
    for obj in objs.values():
        if obj["rootpage"]:
            by_root[int(obj["rootpage"])] = obj
    by_root.setdefault(1, {"name": "sqlite_master", "type": "table", "tbl_name": "sqlite_master",
                           "role": "table", "fts": None, "rootpage": 1})
    groups: Groups = {}

    def add(name: str, kind: str, table: Optional[str], line: str) -> None:
        g = groups.setdefault(name, {"count": 0, "kind": kind, "table": table, "samples": []})
        g["count"] += 1
        if len(g["samples"]) < SAMPLES:
            g["samples"].append(line)

    want = getattr(owner_of, "want", None)
    if want is not None:
        want(int(m.group(1)) for m in (
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


def run_integrity(conn: sqlite3.Connection, objs: Objs, pragma: str, max_errors: int, table: Optional[str] = None,
                  owner_of: Optional[OwnerOf] = None) -> Dict[str, Any]:
    """PRAGMA quick_check/integrity_check with a cap; {"ok", "error_count", "capped", "aborted", "by_object", "lines"}."""
    arg = audit_fts.qi(table) if table else str(int(max_errors))
    out: Dict[str, Any] = {"check": pragma, "max_errors": None if table else int(max_errors), "ok": False,
                           "error_count": 0, "capped": False, "aborted": None, "by_object": {}, "lines": []}
    try:
        rows = [r[0] for r in conn.execute("PRAGMA %s(%s)" % (pragma, arg))]
    except sqlite3.Error as exc:
        out["aborted"] = "%s: %s" % (type(exc).__name__, exc)
        return out
    if rows == ["ok"]:
        out["ok"] = True
        return out
    lines: List[str] = []
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


SCHEMA_TABLE = {"name": "sqlite_master", "type": "table", "tbl_name": "sqlite_master", "rootpage": 1,
                "role": "table", "fts": None, "sql": ""}


def integrity_fallback(conn: sqlite3.Connection, objs: Objs, pragma: str, owner_of: Optional[OwnerOf] = None,
                       with_schema: bool = False) -> Dict[str, Any]:
    """When the whole-file check aborts: check each real table alone to localise the damage
    (`with_schema`: sqlite_master too).

    PRAGMA quick_check(TABLE) needs SQLite 3.33+ and stops at 100 errors per table, so the
    counts are lower bounds; page accounting (unused pages) is not covered.
    """
    if sqlite3.sqlite_version_info < (3, 33, 0):
        return {"done": False, "reason": "SQLite %s has no per-table check" % sqlite3.sqlite_version}
    out: Dict[str, Any] = {"done": True, "tables": {}, "by_object": {}}
    for o in list(objs.values()) + ([SCHEMA_TABLE] if with_schema else []):
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


class PageOwners(object):
    """owner_of(page) for attribute(): the b-tree walk runs once, on first need, and only as far
    as the pages the check's lines name (`want`)."""

    def __init__(self, pins: Pins, header: Dict[str, Any], objs: Objs, use_wal: bool) -> None:
        self.args = (pins, header, objs, use_wal)
        self.wanted: Optional[Set[int]] = None
        self.map: Optional[Dict[int, str]] = None

    def want(self, pages: Iterable[int]) -> None:
        pages = set(pages)
        if self.wanted is None or not pages <= self.wanted:
            self.wanted = (self.wanted or set()) | pages
            self.map = None

    def __call__(self, pg: int) -> Optional[str]:
        if self.map is None:
            try:
                self.map = page_owners(*self.args, wanted=self.wanted)
            except (OSError, ValueError, FormatError):
                self.map = {}
        return self.map.get(pg)


def integrity_tables(conn: sqlite3.Connection, objs: Objs, pragma: str, owner_of: Optional[OwnerOf],
                     why: str) -> Dict[str, Any]:
    """The check table by table (every b-tree, FTS shadow tables included), for a budgeted audit on
    an SQLite whose whole-file check also runs each virtual table's own (FTS5's costs ten times the
    b-trees'). What that leaves out, `why` says: no virtual table's own check, and no page
    accounting (the freelist, pages on no b-tree or on two), which only the whole-file check does."""
    fb = integrity_fallback(conn, objs, pragma, owner_of, with_schema=True)
    by_object = fb.get("by_object") or {}
    return {"check": pragma, "max_errors": None, "ok": bool(fb.get("done")) and not by_object,
            "error_count": sum(g["count"] for g in by_object.values()), "capped": False, "aborted": None,
            "by_object": by_object, "lines": [line for g in by_object.values() for line in g["samples"]],
            "unreferenced_pages": 0, "by_table": fb.get("tables"), "tables_only": why}


def integrity(conn: sqlite3.Connection, objs: Objs, pragma: str, max_errors: int, owner_of: Optional[OwnerOf],
              tables_only: Optional[str] = None) -> Dict[str, Any]:
    """The whole-file check, localised table by table when it aborts; with `tables_only` (why),
    table by table from the start (integrity_tables)."""
    if tables_only:
        return integrity_tables(conn, objs, pragma, owner_of, tables_only)
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


def foreign_keys(conn: sqlite3.Connection, honesty: Dict[str, Dict[str, Any]], limit: int = 100000) -> Dict[str, Any]:
    """PRAGMA foreign_key_check counted by child table; violations whose parent has a damaged index are unreliable."""
    out: Dict[str, Any] = {"violations": 0, "by_table": {}, "unreliable": 0, "samples": [], "error": None}
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
