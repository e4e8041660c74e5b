"""The schema model salvage works with: tables, their affinities and the rows found for each,
and how a leaf page's rows are assigned to a table by their shape.
"""
import re
import sqlite3

from fleetops.remote.sqlite.fileformat.record import InvalidText
from fleetops.remote.sqlite.salvage.sqlutil import content_key, one_row
from fleetops.remote.sqlite.sql import quote_ident

FTS_SHADOW_SUFFIXES = ("data", "idx", "content", "docsize", "config",
                       "segments", "segdir", "stat")


def column_affinity(decl):
    """SQLite column affinity from a declared type (the five rules of datatype3.html)."""
    d = (decl or "").upper()
    if "INT" in d:
        return "INTEGER"
    if "CHAR" in d or "CLOB" in d or "TEXT" in d:
        return "TEXT"
    if "BLOB" in d or not d:
        return "BLOB"
    if "REAL" in d or "FLOA" in d or "DOUB" in d:
        return "REAL"
    return "NUMERIC"


class Table(object):
    """One table of the schema, with what salvage needs to know about its columns."""

    def __init__(self, name, sql, rootpage):
        self.name = name
        self.sql = sql
        self.rootpage = rootpage
        self.columns = []        # names of stored columns, in record order
        self.decl = []
        self.affinity = []
        self.notnull = []
        self.defaults = []       # evaluated default values
        self.alias = None        # index of the INTEGER PRIMARY KEY column
        self.without_rowid = bool(sql and re.search(r"WITHOUT\s+ROWID\s*;?\s*$", sql, re.I))
        self.virtual = bool(sql and re.match(r"\s*CREATE\s+VIRTUAL\s+TABLE", sql, re.I))
        self.shadow_of = None

    @property
    def internal(self):
        return self.name.lower().startswith("sqlite_")

    @property
    def target(self):
        """Tables whose rows salvage copies."""
        return not (self.virtual or self.shadow_of or self.internal)


def load_schema_rows(conn):
    return [dict(zip(("type", "name", "tbl_name", "rootpage", "sql"), r)) for r in conn.execute(
        "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_schema")]


def build_model(schema_rows):
    """Tables with column info, taken from an in-memory replay of the DDL (no hand parsing)."""
    mem = sqlite3.connect(":memory:")
    tables = {}
    problems = []
    for r in schema_rows:
        if r["type"] != "table" or not r["sql"]:
            continue
        t = Table(r["name"], r["sql"], r["rootpage"])
        tables[t.name] = t
        if t.internal or t.virtual:
            continue
        try:
            mem.execute(r["sql"])
        except sqlite3.Error as e:
            problems.append("cannot replay DDL of %s: %s" % (t.name, e))
    virtual = [t.name for t in tables.values() if t.virtual]
    for t in tables.values():
        for v in virtual:
            for suf in FTS_SHADOW_SUFFIXES:
                if t.name == "%s_%s" % (v, suf):
                    t.shadow_of = v
    for t in tables.values():
        if t.virtual or t.internal:
            if t.name == "sqlite_sequence":
                t.columns, t.decl = ["name", "seq"], ["", ""]
            elif t.name.startswith("sqlite_stat"):
                t.columns, t.decl = ["tbl", "idx", "stat"], ["", "", ""]
            t.affinity = [column_affinity(d) for d in t.decl]
            t.notnull = [False] * len(t.columns)
            t.defaults = [None] * len(t.columns)
            continue
        try:
            info = mem.execute("PRAGMA table_xinfo(%s)" % quote_ident(t.name)).fetchall()
        except sqlite3.Error:
            info = []
        pks = [c for c in info if c[5]]
        for _cid, name, decl, notnull, dflt, pk, hidden in info:
            if hidden in (2, 3):       # generated columns: not inserted
                continue
            t.columns.append(name)
            t.decl.append(decl or "")
            t.affinity.append(column_affinity(decl))
            t.notnull.append(bool(notnull))
            val = None
            if dflt is not None:
                try:
                    val = one_row(mem, "SELECT " + dflt)[0]
                except sqlite3.Error:
                    val = None
            t.defaults.append(val)
            if (pk and len(pks) == 1 and (decl or "").upper() == "INTEGER"
                    and not t.without_rowid):
                t.alias = len(t.columns) - 1
    mem.close()
    return tables, problems


def shape_score(table, values):
    """How well a decoded record fits a table; None if it cannot belong to it."""
    n = len(values)
    if not table.columns or n > len(table.columns) or n == 0:
        return None
    score = 2 if n == len(table.columns) else 0
    for i, v in enumerate(values):
        aff = table.affinity[i]
        if table.alias == i:
            if v is not None:
                return None
            score += 2
            continue
        if v is None:
            if table.notnull[i]:
                score -= 1
            continue
        if aff == "TEXT":
            if isinstance(v, (int, float)):
                return None
            score += 2 if isinstance(v, str) else 0
        elif aff == "INTEGER":
            score += 2 if isinstance(v, int) else (0 if isinstance(v, float) else -1)
        elif aff == "REAL":
            score += 2 if isinstance(v, (int, float)) else -1
        elif aff == "NUMERIC":
            score += 1 if isinstance(v, (int, float)) else 0
        elif "BLOB" in table.decl[i].upper():
            score += 2 if isinstance(v, bytes) else 0
        else:
            score += 1
    return score


def assign_page(tables, records):
    """Pick the one table a leaf page belongs to by summed record shape.

    Returns (name, None, []) or (None, why, names tied for first place)."""
    totals = {}
    for t in tables:
        s = 0
        ok = 0
        for vals in records:
            sc = shape_score(t, vals)
            if sc is not None:
                s += sc
                ok += 1
        if ok and ok * 2 >= len(records):
            totals[t.name] = (ok, s)
    if not totals:
        return None, "no table fits the records", []
    ranked = sorted(totals.items(), key=lambda kv: kv[1], reverse=True)
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        tied = [n for n, v in ranked if v == ranked[0][1]]
        return None, "ambiguous between %s" % " and ".join(tied), tied
    return ranked[0][0], None, []


_NUMERIC_TEXT = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")


NUL_RUN = 8


def affinity_doubts(t, values):
    """Why a record cannot have been written as it reads, for this table: a value whose
    storage class the column's affinity would have converted (a number in a TEXT column,
    numeric text in an INTEGER/REAL/NUMERIC one), or a run of NUL characters in text (what a
    zeroed page leaves inside a value; Hermes never writes them)."""
    out = []
    for i, v in enumerate(values[:len(t.columns)]):
        if v is None or i == t.alias:
            continue
        aff = t.affinity[i]
        col = t.columns[i]
        if aff == "TEXT" and isinstance(v, (int, float)):
            out.append("%s: a %s in a TEXT column" % (col, type(v).__name__))
        elif aff in ("INTEGER", "REAL", "NUMERIC") and isinstance(v, str) and _NUMERIC_TEXT.match(v):
            out.append("%s: numeric text in a %s column" % (col, aff))
        elif aff == "INTEGER" and isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 63:
            out.append("%s: an integral REAL in an INTEGER column" % col)
        if isinstance(v, (str, bytes)) and not (isinstance(v, bytes) and not isinstance(v, InvalidText)):
            nul = "\x00" * NUL_RUN if isinstance(v, str) else b"\x00" * NUL_RUN
            if nul in v:
                out.append("%s: a run of NUL characters in text" % col)
    return out


class Version(object):
    """One distinct content seen for one key, and every place it was seen."""

    __slots__ = ("values", "walk", "cells", "first_page", "lineage", "suspect")

    def __init__(self, values):
        self.values = values
        self.walk = False
        self.cells = set()
        self.first_page = None
        self.lineage = False     # seen on a leaf of the table's own tree
        self.suspect = []        # why its content may have changed although it decodes

    @property
    def instances(self):
        return max(len(self.cells), 1 if self.walk else 0)


class TableState(object):
    """Everything found for one target table."""

    def __init__(self, table):
        self.t = table
        self.keys = {}           # rowid -> {content_key: Version}
        self.bad_pages = {}
        self.bad_cells = []
        self.walk_bad_ranges = []
        self.walk_errors = []
        self.double_refs = []
        self.orphan_pages = []
        self.freelist_records = 0
        self.repaired = []
        self.quarantined = 0
        self.quarantined_keys = set()   # rowids of rows quarantined (counted)
        self.quarantine_reasons = {}
        self.undecodable = 0
        self.held_back = {}      # reason -> rows of orphan pages not restored
        self.foreign_cells = {}  # rowid -> {content key: page} of another table's leaf its walk read
        self.foreign_read = 0
        self.invalid_text = []   # rowids saved with text that is not valid UTF-8
        self.suspect = {}        # rowid saved -> why its content is in doubt
        # ---- written by indexes.judge_saved
        self.index_held = []     # rowids saved then held back: in none of the table's indexes
        self.index_moved = {}    # rowid saved -> the rowids its index entries carry (damaged key)
        self.lost_by_index = []  # rowids the indexes hold that no page gave back

    def add(self, rowid, values, walk=False, cell=None, lineage=False):
        versions = self.keys.setdefault(rowid, {})
        ck = content_key(values)
        v = versions.get(ck)
        if v is None:
            v = versions[ck] = Version(values)
        if walk:
            v.walk = True
        if lineage:
            v.lineage = True
        if cell is not None:
            v.cells.add(cell)
            if v.first_page is None or cell[0] < v.first_page:
                v.first_page = cell[0]
        return v


def normalize(t, rowid, values):
    """A page-scan record as SQLite would return it: defaults for short records,
    the rowid in the INTEGER PRIMARY KEY column, REAL affinity ints as floats."""
    vals = list(values[:len(t.columns)])
    if len(vals) < len(t.columns):
        vals.extend(t.defaults[len(vals):])
    if t.alias is not None:
        vals[t.alias] = rowid
    for i, aff in enumerate(t.affinity):
        if aff == "REAL" and isinstance(vals[i], int) and i != t.alias:
            vals[i] = float(vals[i])
    return vals
