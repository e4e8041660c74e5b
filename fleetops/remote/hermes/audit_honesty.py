"""Index honesty: counts from table scans, checked against what every index says.

count(*) answered from a damaged unique index hid a duplicated row in the field; so each base
table is counted NOT INDEXED, its distinct rowids and primary keys are compared with that, and
every index's (entries, sum of rowids) with the table scan's.
"""
import re
import sqlite3

from fleetops.remote.hermes import audit_fts
from fleetops.remote.hermes import audit_schema

def _partial_where(sql):
    m = re.search(r"\)\s*WHERE\s+(.*)$", sql or "", re.I | re.S)
    return m.group(1).strip().rstrip(";") if m else None


def index_honesty(conn, objs):
    """Per base table: count(*) vs count(*) NOT INDEXED vs distinct keys of a table scan, and per index its entries."""
    return dict((o["name"], table_honesty(conn, o, objs))
                for o in sorted(audit_schema.base_tables(objs), key=lambda x: x["name"]))


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
