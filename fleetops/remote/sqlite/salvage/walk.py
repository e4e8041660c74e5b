"""SQLite's own table walk (seeks by rowid, NOT INDEXED) over what the b-trees still reach,
and the quarantine file for every row that is not saved.
"""
import bisect
import json
import os
import sqlite3

from fleetops.remote.sqlite.fileformat.record import text_or_invalid
from fleetops.remote.sqlite.salvage.model import affinity_doubts
from fleetops.remote.sqlite.salvage.sqlutil import jsonable
from fleetops.remote.sqlite.salvage.state import INT64_MAX, INT64_MIN
from fleetops.remote.sqlite.sql import quote_ident


def walk_table(s, st):
    """Copy a table through SQLite by rowid seeks, skipping damaged key ranges."""
    t = st.t
    if s.schema.src is None or t.without_rowid:
        if t.without_rowid and s.schema.src is not None:
            walk_without_rowid(s, st)
        return
    sql = ("SELECT rowid, * FROM %s NOT INDEXED WHERE rowid > ? ORDER BY rowid LIMIT ?"
           % quote_ident(t.name))
    try:
        probe = s.schema.src.execute("SELECT * FROM %s LIMIT 0" % quote_ident(t.name))
        ncols = len(probe.description)
    except sqlite3.Error as e:
        st.walk_errors.append("table unreadable by SQLite: %s" % e)
        return
    if ncols != len(t.columns):
        st.walk_errors.append("SQLite returns %d columns, schema model %d" % (ncols, len(t.columns)))
        return
    known = sorted(st.keys)
    sql_ge = sql.replace("rowid > ?", "rowid >= ?")
    last = None              # largest rowid read so far (None: start of the table)
    floor = None             # keys up to here are known to fail
    resumed = None
    seen_walk = set()
    while True:
        got = 0
        err = None
        hi = last
        try:
            cur = (s.schema.src.execute(sql_ge, (INT64_MIN, s.args.batch)) if last is None
                   else s.schema.src.execute(sql, (last, s.args.batch)))
            for row in cur:
                got += 1
                rid = row[0]
                v = st.add(rid, list(row[1:]), walk=True)
                if not v.cells:
                    for why in affinity_doubts(t, v.values):
                        if why not in v.suspect:
                            v.suspect.append(why)
                seen_walk.add(rid)
                if hi is None or rid > hi:
                    hi = rid
        except sqlite3.DatabaseError as e:
            err = str(e)
            if "decode" in err and s.schema.src.text_factory is not text_or_invalid:
                # text that is not valid UTF-8: read it as the bytes it is, from here on
                s.schema.src.text_factory = text_or_invalid
                continue
        if err is None:
            if got < s.args.batch or hi >= INT64_MAX:
                break
            last = hi
            resumed = None
            continue
        if got == 0 and resumed is not None:
            floor = resumed     # the resume key itself fails in a batch: never retry it
        last = hi
        start = max(x for x in (INT64_MIN - 1, last, floor) if x is not None)
        nxt = skip_forward(s, st, known, start)
        st.walk_bad_ranges.append({"after_rowid": last, "resume_rowid": nxt, "error": err})
        if nxt is None or nxt <= start or nxt <= INT64_MIN:
            break
        resumed = nxt
        last = nxt - 1
    # keys the page scan knows but the seeks did not return: passed over (a garbage key
    # reorders a tree) or lost with an error (Python's cursor steps one row ahead, so
    # the row before a failing step is never handed out). A point read never steps on.
    point = "SELECT rowid, * FROM %s NOT INDEXED WHERE rowid = ?" % quote_ident(t.name)
    for k in known:
        if k in seen_walk:
            continue
        for _try in (1, 2):
            try:
                for row in s.schema.src.execute(point, (k,)).fetchall():
                    st.add(row[0], list(row[1:]), walk=True)
            except sqlite3.DatabaseError as e:
                if "decode" in str(e) and s.schema.src.text_factory is not text_or_invalid:
                    s.schema.src.text_factory = text_or_invalid
                    continue
            break


def readable_from(s, t, rowid):
    try:
        # as far as a batch reads: a seek can succeed where the next step fails
        s.schema.src.execute("SELECT rowid, * FROM %s NOT INDEXED WHERE rowid >= ? ORDER BY rowid "
                      "LIMIT ?" % quote_ident(t.name), (rowid, s.args.batch)).fetchall()
        return True
    except sqlite3.DatabaseError:
        return False


def skip_forward(s, st, known, last):
    """First key after `last` from which SQLite reads again: exponential search then
    bisection over the keys the page scan found, else probes up the rowid space."""
    t = st.t
    cands = known[bisect.bisect_right(known, last):]
    lo, j, step, ok = -1, 0, 1, None
    while j < len(cands):
        if readable_from(s, t, cands[j]):
            ok = j
            break
        lo = j
        j += step
        step *= 2
    if ok is None and cands and lo != len(cands) - 1 and readable_from(s, t, cands[-1]):
        ok = len(cands) - 1
    if ok is not None:
        hi = ok
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if readable_from(s, t, cands[mid]):
                hi = mid
            else:
                lo = mid
        return cands[hi]
    base = cands[-1] if cands else max(last, INT64_MIN)
    step = 1
    while base + step <= INT64_MAX:
        if readable_from(s, t, base + step):
            return base + step
        step *= 4
    return None


def walk_without_rowid(s, st):
    t = st.t
    try:
        for i, row in enumerate(s.schema.src.execute("SELECT * FROM %s" % quote_ident(t.name))):
            st.add(("wr", i), list(row), walk=True)
    except sqlite3.DatabaseError as e:
        st.walk_errors.append("WITHOUT ROWID table read stopped: %s" % e)


def quarantine(s, table, rowid, values, reason, page=None, raw=None, count=True):
    if s.quarantine.qfh is None:
        fd = os.open(s.args.quarantine_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        s.quarantine.qfh = os.fdopen(fd, "w")
        s.report["quarantine_file"] = s.args.quarantine_path
    rec = {"table": table, "rowid": rowid if not isinstance(rowid, tuple) else None,
           "reason": reason, "page": page}
    if values is not None:
        cols = s.schema.tables[table].columns if table in s.schema.tables else None
        vals = [jsonable(v) for v in values]
        rec["values"] = dict(zip(cols, vals)) if cols and len(cols) == len(vals) else vals
    if raw is not None:
        rec["raw_hex"] = bytes(raw).hex()
    s.quarantine.qfh.write(json.dumps(rec, sort_keys=True) + "\n")
    if count:
        s.quarantine.q_count += 1
        if table in s.schema.states:
            st = s.schema.states[table]
            st.quarantined += 1
            st.quarantined_keys.add(rowid)
            key = reason.split(":")[0]
            st.quarantine_reasons[key] = st.quarantine_reasons.get(key, 0) + 1
