"""The source's indexes as copies of its rows (fleetops.remote.sqlite.indexcopies): read
once, they order a key's versions (the one its indexes hold first) and, once the rows are
in, hold back a saved row no index holds (a deleted or superseded row on a stale page),
flag one whose indexed columns its indexes contradict, and count the rows the indexes know
of that no page gave back.
"""
import sqlite3

from fleetops.remote.sqlite import indexcopies
from fleetops.remote.sqlite.salvage import walk
from fleetops.remote.sqlite.salvage.model import normalize
from fleetops.remote.sqlite.sql import partial_where, quote_ident

HELD = "not in any index"


def read_copies(s):
    """Every index of every target table with rowids: read by SQLite from the source, or
    from its pages where SQLite cannot read the source (after the page classification)."""
    s.scan.index_copies = {}
    by_table = {}
    for r in s.schema.schema_rows:
        if r["type"] == "index" and r.get("tbl_name") in s.schema.states \
                and not s.schema.states[r["tbl_name"]].t.without_rowid:
            by_table.setdefault(r["tbl_name"], []).append(r)
    mem = _schema_replay(s, by_table) if s.schema.src is None else None
    for name, rows in by_table.items():
        try:
            if s.schema.src is not None:
                s.scan.index_copies[name] = indexcopies.read_indexes(s.schema.src, name, rows)
            elif mem is not None:
                s.scan.index_copies[name] = from_pages(s, mem, name, rows)
        except sqlite3.Error as e:
            s.notes.append("indexes of %s not read: %s" % (name, e))
    if mem is not None:
        mem.close()
    s.report["index_copies"] = dict((n, [c.as_dict() for c in cs])
                                    for n, cs in sorted(s.scan.index_copies.items()))


def _schema_replay(s, by_table):
    """An empty in-memory database with the tables and indexes of the schema, to learn each
    index's columns (autoindexes included) without reading the source."""
    mem = sqlite3.connect(":memory:")
    for name in by_table:
        try:
            mem.execute(s.schema.tables[name].sql)
        except sqlite3.Error:
            continue
    for rows in by_table.values():
        for r in rows:
            if r.get("sql"):
                try:
                    mem.execute(r["sql"])
                except sqlite3.Error:
                    continue
    return mem


def from_pages(s, mem, table, rows):
    """IndexCopy of each index of `table` read from the pages its walk reached."""
    out = []
    walks = s.scan.classes.get("walks", {})
    for r in rows:
        w = walks.get(r["name"])
        try:
            cols, why = indexcopies.index_columns(mem, r["name"])
        except sqlite3.Error as e:
            cols, why = None, str(e)
        partial = partial_where(r.get("sql")) is not None
        if w is None or cols is None or w.is_table:
            ic = indexcopies.IndexCopy(r["name"], table, [], partial)
            ic.error = why or "its tree is not an index tree the reader walked"
            out.append(ic)
            continue
        out.append(indexcopies.read_index_pages(s.image.reader, w, table, r["name"], cols, partial))
    return out


def judge_for(s, st):
    """The Judge of st's table over the keys the walk and the page scan found (None: no
    index to judge by)."""
    copies = s.scan.index_copies.get(st.t.name)
    if not copies:
        return None
    return indexcopies.Judge(copies, st.t.columns,
                             [k for k in st.keys if not isinstance(k, tuple)])


def vouch_for_orphan(s, st, recs):
    """True when an orphan leaf is a live page its tree lost: every record decodes, its key
    is in none of the tree's own leaves, and complete indexes hold it as it reads."""
    copies = s.scan.index_copies.get(st.t.name)
    if not copies or not recs:
        return False
    judge = indexcopies.Judge(copies, st.t.columns)
    for c, v in recs:
        if v is None or c.rowid is None or len(v) > len(st.t.columns):
            return False
        if any(x.lineage for x in st.keys.get(c.rowid, {}).values()):
            return False
        if not judge.vouches(c.rowid, normalize(st.t, c.rowid, v)):
            return False
    return True


def version_rank(judge, rowid, v):
    """0 for a version its indexes agree with (or cannot tell), 1 for one they contradict."""
    if judge is None or isinstance(rowid, tuple):
        return 0
    return 0 if judge.judge(rowid, v.values)[0] in ("agrees", "no evidence", "moved") else 1


def judge_saved(s):
    """Each saved row against its table's indexes, in the output (see module docstring)."""
    for name, st in s.schema.states.items():
        judge = judge_for(s, st)
        if judge is None:
            continue
        t = st.t
        cols = ", ".join(quote_ident(c) for c in t.columns)
        rows = s.dest.out.execute("SELECT rowid, %s FROM %s NOT INDEXED" % (cols, quote_ident(name))
                             ).fetchall()
        repaired = set((x["rowid"], x["column"]) for x in st.repaired)
        held = []
        for row in rows:
            rowid, values = row[0], list(row[1:])
            verdict, why = judge.judge(rowid, values)
            if verdict == "absent":
                held.append((rowid, values, why))
            elif verdict == "differs":
                reasons = ["%s: %s holds %r, the row %r" % (col, idx, iv, rv)
                           for idx, col, iv, rv in why if (rowid, col) not in repaired]
                if reasons:
                    st.suspect.setdefault(rowid, []).extend(
                        ["its indexed columns disagree with its indexes (a stale or "
                         "damaged copy): " + "; ".join(reasons)])
            elif verdict == "moved":
                st.index_moved[rowid] = why
        hold_back(s, st, held)
        saved = set(r[0] for r in rows) - set(h[0] for h in held)
        known = saved | set(k for k in st.keys if not isinstance(k, tuple)) | st.quarantined_keys
        known.update(c["rowid"] for c in st.bad_cells if c.get("rowid") is not None)
        for moved in st.index_moved.values():
            known.update(moved)
        st.lost_by_index = sorted(judge.known_elsewhere(known))


def hold_back(s, st, held):
    """Saved rows no complete index holds: out of the output, into the quarantine, counted
    as held back (a deleted or superseded row), not as lost."""
    if not held:
        return
    s.dest.out.execute("BEGIN")
    for rowid, values, indexes in held:
        v = next((x for x in st.keys.get(rowid, {}).values() if x.values == values), None)
        n = v.instances if v is not None else 1
        st.identified -= n          # a held-back row is neither saved nor lost
        st.duplicates -= n - 1
        s.dest.out.execute("DELETE FROM %s WHERE rowid = ?" % quote_ident(st.t.name), (rowid,))
        walk.quarantine(s, st.t.name, rowid, values,
                        "held back: key %s is in none of the indexes of %s (%s): a deleted "
                        "or superseded row on a stale page"
                        % (rowid, st.t.name, ", ".join(indexes)), count=False)
    s.dest.out.execute("COMMIT")
    st.held_back[HELD] = st.held_back.get(HELD, 0) + len(held)
    st.index_held = [h[0] for h in held]
    hb = s.scan.held_back
    hb["rows"] += len(held)
    hb["by_reason"][HELD] = hb["by_reason"].get(HELD, 0) + len(held)
