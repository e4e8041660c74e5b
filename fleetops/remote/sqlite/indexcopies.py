"""Index copies: what each index of a table holds about its rows, read in the index's own
order, and the one judgement of a row against them.

Why: every index entry is a second copy of a row's key and indexed columns, written in the
same transaction as the row. A table page that lost a write (an older, well-formed version
of itself) reads as fine on its own, but its rows disagree with every index: a row deleted
since then is in no index, a row changed since then has indexed columns that differ from
its entries. An index that lost entries (emptied, a flipped key) leaves a row missing from
that index only; the other indexes still hold it.

The judgement, for one row (rowid, values) against the indexes read completely:
- "absent": every complete index that must hold every row (not partial) lacks its rowid:
  the row is a deleted or superseded one, unless its indexed values sit in every such index
  under a rowid no row has (its key was damaged: "moved").
- "differs": an index holds an entry for its rowid whose value of some column is not the
  row's: every index holding that column is a copy against it (the row is stale or damaged).
- "agrees": otherwise (missing from some indexes only: those indexes are damaged).

Stdlib only, Python 3.8+ (host code).
"""
import sqlite3

from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.record import decode_record
from fleetops.remote.sqlite.sql import partial_where, quote_ident

UNREAD = object()


class IndexCopy(object):
    """One index's entries: rowid -> tuple of its indexed columns' values."""

    __slots__ = ("name", "table", "columns", "partial", "entries", "complete", "error")

    def __init__(self, name, table, columns, partial):
        self.name = name
        self.table = table
        self.columns = columns      # column names, in the index's order
        self.partial = partial      # a partial index holds only the rows its WHERE admits
        self.entries = {}
        self.complete = False       # read to its end without an error
        self.error = None

    def as_dict(self):
        return {"index": self.name, "columns": list(self.columns), "partial": self.partial,
                "entries": len(self.entries), "complete": self.complete, "error": self.error}


def index_columns(con, name):
    """(column names, None) of an index on plain columns, or (None, why) when it cannot be
    compared with its rows column by column (an expression)."""
    cols = []
    for _seq, cid, cname, _desc, _coll, key in con.execute(
            "PRAGMA index_xinfo(%s)" % quote_ident(name)):
        if not key:
            continue
        if cid == -2 or cname is None:
            return None, "an expression index"
        cols.append(cname)
    return cols, None


def read_index(con, table, name, sql):
    """Every entry of one index, by a covering scan of the index alone (never the table);
    an error part way keeps the entries read so far (complete stays False)."""
    cols, why = index_columns(con, name)
    where = partial_where(sql)
    ic = IndexCopy(name, table, cols or [], where is not None)
    if cols is None:
        ic.error = why
        return ic
    q = "SELECT %s FROM %s INDEXED BY %s%s" % (
        ", ".join([quote_ident(c) for c in cols] + ["rowid"]), quote_ident(table),
        quote_ident(name), " WHERE " + where if where else "")
    try:
        plan = " ".join(str(r[-1]) for r in con.execute("EXPLAIN QUERY PLAN " + q))
        if "COVERING INDEX" not in plan.upper():
            ic.error = "not readable by a covering scan (%s)" % plan
            return ic
        for row in con.execute(q):
            ic.entries[row[-1]] = tuple(row[:-1])
        ic.complete = True
    except sqlite3.Error as e:
        ic.error = str(e)
    return ic


def read_index_pages(reader, walk, table, name, columns, partial):
    """The entries of one index from its pages (fileformat reader), where SQLite cannot
    read the file: every cell of every page its tree walk reached, interior ones too (an
    index keeps entries in both). Complete when the walk lost no page and no cell."""
    ic = IndexCopy(name, table, columns, partial)
    n = len(columns)
    for pgno in sorted(walk.pages):
        try:
            page = reader.btree_page(pgno)
            for i in range(page.ncells):
                c = reader.read_cell(page, i)
                vals = decode_record(c.payload, reader.encoding)
                if len(vals) == n + 1 and isinstance(vals[-1], int):
                    ic.entries[vals[-1]] = tuple(vals[:n])
        except FormatError as e:
            ic.error = str(e)
    ic.complete = ic.error is None and not walk.bad_pages and not walk.bad_cells \
        and not walk.double_refs
    if not ic.complete and ic.error is None:
        ic.error = "its tree lost pages or cells"
    return ic


def read_indexes(con, table, index_rows):
    """IndexCopy of every index of `table` ({name, sql} rows of sqlite_schema)."""
    return [read_index(con, table, r["name"], r.get("sql")) for r in index_rows]


class Judge(object):
    """The indexes of one table against a set of its rows (see the module docstring)."""

    def __init__(self, copies, columns, known_rowids=()):
        self.copies = [c for c in copies if c.columns]
        self.full = [c for c in self.copies if c.complete and not c.partial]
        self.columns = list(columns)
        self.known = set(known_rowids)
        self._orphans = None

    @property
    def orphans(self):
        """Per complete full index, its entries whose rowid no known row has (values ->
        rowid): where a row whose key was damaged still has its copies."""
        if self._orphans is None:
            self._orphans = [dict((vals, r) for r, vals in c.entries.items()
                                  if r not in self.known) for c in self.full]
        return self._orphans

    def vouches(self, rowid, values):
        """True when complete indexes hold this row, as it reads."""
        return bool(self.full) and self.judge(rowid, values)[0] == "agrees"

    def _value(self, values, col):
        if col in self.columns:
            return values[self.columns.index(col)]
        return UNREAD

    def judge(self, rowid, values):
        """("agrees" | "absent" | "moved" | "differs" | "no evidence", details)."""
        if not self.copies:
            return "no evidence", []
        differ = []
        present = 0
        for c in self.copies:
            got = c.entries.get(rowid)
            if got is None:
                continue
            present += 1
            for col, iv in zip(c.columns, got):
                rv = self._value(values, col)
                if rv is not UNREAD and not _same(rv, iv):
                    differ.append((c.name, col, iv, rv))
        if differ:
            return "differs", differ
        if present or not self.full:
            return ("agrees" if present else "no evidence"), []
        moved = set()
        for c, orph in zip(self.full, self.orphans):
            key = tuple(self._value(values, col) for col in c.columns)
            if key not in orph:
                return "absent", [c.name for c in self.full]
            moved.add(orph[key])
        return "moved", sorted(moved)

    def known_elsewhere(self, rowids):
        """Rowids outside `rowids` that two indexes hold (one where the table has a single
        index): rows that existed and are not among them."""
        need = min(2, len([c for c in self.copies if not c.partial]) or 1)
        seen = {}
        for c in self.copies:
            for r in c.entries:
                if r not in rowids:
                    seen[r] = seen.get(r, 0) + 1
        return set(r for r, n in seen.items() if n >= need)


def _same(a, b):
    """Equal as SQLite compares them: 1 and 1.0 are the same number, 1 and '1' are not."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b or (isinstance(a, str) and isinstance(b, str)
                                              and str(a) == str(b))
