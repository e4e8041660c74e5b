"""The schema of the image: from SQLite, from schema_from, or from the page reader plus the
rules' shipped DDL for the objects a store lost with its schema page.
"""
import sqlite3

from fleetops.remote.sqlite.fileformat.btree import TABLE_LEAF
from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.salvage.model import (
    TableState,
    build_model,
    load_schema_rows,
)
from fleetops.remote.sqlite.salvage.sqlutil import file_uri
from fleetops.remote.sqlite.salvage.state import SalvageInputError


def load_schema(s, image):
    s.schema.src = None
    src_rows = None
    err = None
    try:
        s.schema.src = sqlite3.connect(file_uri(image, mode="ro", immutable="1"), uri=True)
        src_rows = load_schema_rows(s.schema.src)
    except sqlite3.Error as e:
        err = str(e)
        if s.schema.src:
            s.schema.src.close()
        s.schema.src = None
    s.report["source_schema_error"] = err
    reader_rows = None
    if src_rows is None:
        reader_rows = recover_schema_rows(s)
    if s.args.schema_from:
        hc = sqlite3.connect(file_uri(s.args.schema_from, mode="ro"), uri=True)
        try:
            ddl_rows = load_schema_rows(hc)
        finally:
            hc.close()
        roots = dict((x["name"], x["rootpage"]) for x in (src_rows or reader_rows or []))
        for x in ddl_rows:
            x["rootpage"] = roots.get(x["name"], 0)
        s.schema.schema_rows = ddl_rows
        s.report["schema_source"] = "schema_from"
        if src_rows is None:
            s.notes.append("source schema unreadable by SQLite (%s): DDL from schema_from, "
                           "%d root pages recovered by the page reader"
                           % (err, sum(1 for v in roots.values() if v)))
    elif src_rows is not None:
        s.schema.schema_rows = src_rows
        s.report["schema_source"] = "source"
    else:
        added = schema_fallback(s, reader_rows or [])
        if not reader_rows and not added:
            raise SalvageInputError("source schema unreadable (%s) and not recognised as a %s; "
                                    "pass schema_from" % (err, s.args.rules.recognised_as))
        s.schema.schema_rows = (reader_rows or []) + added
        s.report["schema_source"] = "page-reader"
        s.notes.append("schema read by the page reader after SQLite failed: %s" % err)
    s.schema.tables, problems = build_model(s.schema.schema_rows)
    s.notes.extend(problems)
    s.schema.states = dict((n, TableState(t)) for n, t in s.schema.tables.items() if t.target)


def schema_fallback(s, rows):
    """Schema rows for the objects whose DDL the source lost, from the rules' shipped schema of
    the version that made it (root pages unknown: their pages are found by the page scan).
    Reported per object; [] when the version cannot be told."""
    if s.args.rules.lost_schema is None:
        lost, how = None, "no shipped schema to take it from"
    else:
        lost, how = s.args.rules.lost_schema(rows, s.image.reader)
    rep = s.report["schema_fallback"] = {"used": False, "identified_by": how}
    if lost is None:
        s.notes.append("no fallback schema for the lost DDL: %s" % how)
        return []
    have = set(r["name"] for r in rows)
    added = [{"type": o[0], "name": o[1], "tbl_name": o[2], "rootpage": 0, "sql": o[3]}
             for o in lost.objects if o[1] not in have]
    rep["used"] = bool(added)
    rep.update(lost.fields)
    rep["objects"] = [r["name"] for r in added]
    if added:
        s.notes.append("DDL of %d objects lost with the schema page, taken from the schema "
                       "%s creates (%s): %s" % (len(added), lost.made_by, how,
                                               ", ".join(r["name"] for r in added)))
    return added


def recover_schema_rows(s):
    """sqlite_schema rows when SQLite cannot read them: page 1's tree, then every
    table leaf off the freelist whose records look like schema rows (a damaged
    schema page orphans the others). A name seen with two root pages is dropped."""
    rd = s.image.reader
    found = {}
    try:
        for r in rd.schema_rows():
            found.setdefault(r["name"], []).append(r)
    except FormatError:
        pass
    fl = rd.freelist()
    skip = set(fl["trunks"]) | set(fl["leaves"])
    for pgno in range(2, rd.page_count + 1):
        if pgno in skip:
            continue
        try:
            if rd.page(pgno)[0] != TABLE_LEAF:
                continue
            recs = list(rd.leaf_records(pgno))
        except FormatError:
            continue
        for _c, v in recs:
            if (v and len(v) == 5 and v[0] in ("table", "index", "view", "trigger")
                    and isinstance(v[1], str) and isinstance(v[2], str)
                    and isinstance(v[3], int) and v[3] >= 0
                    and (v[4] is None or (isinstance(v[4], str)
                                          and v[4].lstrip().upper().startswith("CREATE")))):
                found.setdefault(v[1], []).append(
                    {"type": v[0], "name": v[1], "tbl_name": v[2], "rootpage": v[3],
                     "sql": v[4]})
    rows = []
    for name, rs in found.items():
        if len(set(r["rootpage"] for r in rs)) == 1:
            rows.append(rs[0])
        else:
            s.notes.append("schema object %s found with several root pages %s: ignored"
                           % (name, sorted(set(r["rootpage"] for r in rs))))
    return rows
