"""Index honesty: counts from table scans, and every index checked entry by entry against them.

count(*) answered from a damaged unique index hid a duplicated row in the field; so each base
table is counted NOT INDEXED and its distinct rowids and primary keys are compared with that.
Each index is read once in its own order (a covering scan of its b-tree) and its entries
(indexed values, rowid) are fingerprinted against the same tuples computed from a table scan:
an entry whose key bit flipped leaves every count equal but changes the fingerprint. Only
when they differ are the two sides merged, to name the rows the index lacks or holds in excess.
"""
from __future__ import annotations

import collections
import re
import sqlite3
from typing import Any, Counter, Dict, Iterator, List, Optional, Tuple

from fleetops.remote.hermes import audit_fts
from fleetops.remote.hermes import audit_schema
from fleetops.remote.hermes.audit_schema import Obj, Objs
from fleetops.remote.sqlite.sql import partial_where, split_top

BATCH = 4096
SHOWN = 5       # rowids named per side of a mismatch
MASK = (1 << 64) - 1


def _index_terms(sql: Optional[str]) -> List[str]:
    """The indexed terms of CREATE INDEX ... ON t(term, ...), without COLLATE/ASC/DESC."""
    m = re.search(r"\bON\s+(?:\"[^\"]*\"|\S+?)\s*\(", sql or "", re.I)
    if not m or sql is None:
        return []
    depth, i = 1, m.end()
    while i < len(sql) and depth:
        depth += {"(": 1, ")": -1}.get(sql[i], 0)
        i += 1
    terms = split_top(sql[m.end():i - 1])
    return [re.sub(r"(\s+COLLATE\s+\S+)?(\s+(ASC|DESC))?\s*$", "", t.strip(), flags=re.I) for t in terms]


def index_columns(conn: sqlite3.Connection, iname: str, sql: Optional[str]) -> Tuple[List[str], List[int]]:
    """(select list, expression terms left out): every key and auxiliary column of the index
    (the rowid, or a WITHOUT ROWID table's key), an expression key by its text."""
    cols: List[Optional[str]] = []
    skipped = []
    terms = _index_terms(sql)
    for seq, cid, name, _desc, _coll, key in conn.execute("PRAGMA index_xinfo(%s)" % audit_fts.qi(iname)):
        if cid == -1:
            cols.append("rowid")
        elif cid == -2:
            cols.append("(%s)" % terms[seq] if key and seq < len(terms) else None)
        else:
            cols.append(audit_fts.qi(name))
    for i, c in enumerate(cols):
        if c is None:
            skipped.append(i)
    return [c for c in cols if c is not None], skipped


def index_honesty(conn: sqlite3.Connection, objs: Objs) -> Dict[str, Dict[str, Any]]:
    """Per base table: count(*) vs count(*) NOT INDEXED vs distinct keys of a table scan, and per index its entries."""
    return dict((o["name"], table_honesty(conn, o, objs))
                for o in sorted(audit_schema.base_tables(objs), key=lambda x: x["name"]))


def table_honesty(conn: sqlite3.Connection, o: Obj, objs: Objs) -> Dict[str, Any]:
    """One base table's honesty figures; every query in the caller's one read transaction."""
    t = o["name"]
    q = audit_fts.qi(t)
    rec: Dict[str, Any] = {"count": None, "count_scan": None, "distinct_rowid": None, "distinct_pk": None,
           "duplicates": 0, "indexes": {}, "errors": []}
    without_rowid = bool(re.search(r"\bWITHOUT\s+ROWID\b", o["sql"], re.I))
    try:
        rec["count"] = audit_fts.count(conn, "SELECT count(*) FROM %s" % q)
        rec["count_scan"] = audit_fts.count(conn, "SELECT count(*) FROM %s NOT INDEXED" % q)
        pk = [r[1] for r in sorted(conn.execute("PRAGMA table_info(%s)" % q).fetchall(), key=lambda r: r[5])
              if r[5]]
        if not without_rowid:
            # rowid+0: SQLite knows rowid is unique and would drop a DISTINCT on it (a duplicated cell has one rowid)
            rec["distinct_rowid"] = audit_fts.count(
                conn, "SELECT count(*) FROM (SELECT DISTINCT rowid+0 FROM %s NOT INDEXED)" % q)
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
        where = partial_where(io.get("sql")) if partial else None
        try:
            rec["indexes"][iname] = index_truth(conn, q, iname, io.get("sql"), (" WHERE %s" % where) if where else "",
                                                distinct=bool(rec["duplicates"]))
        except sqlite3.Error as exc:
            rec["indexes"][iname] = {"entries": None, "expected": None, "ok": None,
                                     "error": "%s: %s" % (type(exc).__name__, exc)}
    return rec


def index_truth(conn: sqlite3.Connection, q: str, iname: str, sql: Optional[str], where: str,
                distinct: bool = False) -> Dict[str, Any]:
    """One index against its table: the entries read in the index's own order, fingerprinted
    against the same tuples from a table scan; on a mismatch, the rows it lacks and holds in excess.
    `distinct`: the table holds duplicated cells (judged as structural), so its side counts each
    tuple once instead of blaming every index for holding it once."""
    cols, skipped = index_columns(conn, iname, sql)
    select = "SELECT %s FROM %s %%s%s" % (", ".join(cols), q, where)
    through = select % ("INDEXED BY %s" % audit_fts.qi(iname))
    if distinct:   # rowid+0: SQLite knows rowid is unique and would drop a DISTINCT on it
        select = "SELECT DISTINCT %s FROM %s %%s%s" % (", ".join("rowid+0" if c == "rowid" else c for c in cols),
                                                       q, where)
    try:
        plan = " ".join(str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + through))
    except sqlite3.OperationalError as exc:
        if "no query solution" not in str(exc):
            raise
        # this SQLite proves the index's WHERE never true (a NOT NULL column IS NULL) and will not read it
        return {"entries": None, "expected": None, "ok": None, "unplanned": "SQLite %s plans no scan of it: "
                "its WHERE is never true on this table" % sqlite3.sqlite_version}
    try:
        side_table = fingerprint(conn, select % "NOT INDEXED")
    except sqlite3.Error as exc:
        return {"entries": None, "expected": None, "ok": None, "error_side": "table",
                "error": "%s: %s" % (type(exc).__name__, exc)}
    try:
        side_index = fingerprint(conn, through)
    except sqlite3.Error as exc:
        return {"entries": None, "expected": side_table[0], "ok": False, "error_side": "index",
                "error": "%s: %s" % (type(exc).__name__, exc)}
    out: Dict[str, Any] = {"entries": side_index[0], "expected": side_table[0], "ok": side_index == side_table,
           "lacks": 0, "excess": 0, "covering": "COVERING INDEX" in plan}
    if skipped:
        out["keys_unread"] = "expression keys read from the table (this SQLite reads them through the index " \
                             "only where the plan covers them): rowids and plain columns compared"
    elif not out["covering"]:
        out["keys_unread"] = "plan reads the table as well (%s)" % plan
    if not out["ok"]:
        lacks, excess = merge(conn, select % "NOT INDEXED", through)
        out.update(lacks=sum(lacks.values()), excess=sum(excess.values()),
                   lacks_rows=_rowids(lacks, cols), excess_rows=_rowids(excess, cols))
    return out


def _raw_rows(conn: sqlite3.Connection, sql: str) -> Iterator[List[Any]]:
    """The rows of `sql` with TEXT as its stored bytes: text that is not valid UTF-8 (which SQLite
    stores and returns) is compared, never a decoding failure."""
    old = conn.text_factory
    conn.text_factory = bytes
    try:
        cur = conn.execute(sql)
        while True:
            batch = cur.fetchmany(BATCH)
            if not batch:
                return
            yield batch
    finally:
        conn.text_factory = old


def fingerprint(conn: sqlite3.Connection, sql: str) -> Tuple[int, int]:
    """(rows, sum of the rows' hashes): the same multiset of tuples gives the same pair, in any order."""
    n = s = 0
    for batch in _raw_rows(conn, sql):
        n += len(batch)
        s += sum(map(hash, batch))
    return n, s & MASK


def merge(conn: sqlite3.Connection, table_sql: str, index_sql: str) -> Tuple[Counter[Any], Counter[Any]]:
    """(rows the index lacks, rows it holds in excess) as multisets of tuples."""
    want: Counter[Any] = collections.Counter()
    have: Counter[Any] = collections.Counter()
    for counter, sql in ((want, table_sql), (have, index_sql)):
        for batch in _raw_rows(conn, sql):
            counter.update(batch)
    return want - have, have - want


def _rowids(counter: Counter[Any], cols: List[str]) -> List[Any]:
    """The first SHOWN rowids (or whole tuples, without a rowid column) of a mismatch side."""
    at = cols.index("rowid") if "rowid" in cols else None
    rows = [r[at] if at is not None else r for r in counter]
    try:
        rows.sort()
    except TypeError:
        rows.sort(key=repr)
    return rows[:SHOWN]


def _is_integer_pk(conn: sqlite3.Connection, table: str, col: str) -> bool:
    """An INTEGER PRIMARY KEY column is the rowid itself: no separate distinct check needed."""
    for r in conn.execute("PRAGMA table_info(%s)" % audit_fts.qi(table)).fetchall():
        if r[1] == col:
            return (r[2] or "").strip().upper() == "INTEGER"
    return False
