"""The output: a new file in the source's format, the rows of every table loaded (in the
rules' order, versions voted against the source's copies), NOT NULL values repaired by the
rules, foreign keys and sequences made consistent.
"""
import os
import re
import sqlite3
import time

from fleetops.remote.sqlite.fileformat.record import InvalidText, text_or_invalid
from fleetops.remote.sqlite.salvage import fts, ftsbuild, index_evidence, walk
from fleetops.remote.sqlite.salvage.model import Version
from fleetops.remote.sqlite.salvage.rules import load_order
from fleetops.remote.sqlite.salvage.sqlutil import one_row, file_uri
from fleetops.remote.sqlite.sql import quote_ident


def write_output(s):
    s.dest.tmp_out = s.args.output + ".salvage-tmp"
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(s.dest.tmp_out + suffix):
            os.unlink(s.dest.tmp_out + suffix)
    fd = os.open(s.dest.tmp_out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    out = sqlite3.connect(s.dest.tmp_out, isolation_level=None)
    out.text_factory = text_or_invalid
    s.dest.out = out
    out.execute("PRAGMA foreign_keys=OFF")
    out.execute("PRAGMA journal_mode=DELETE")
    out.execute("PRAGMA synchronous=OFF")
    keep = s.image.keep
    # the source's header fields, set before the first table exists (page size, encoding
    # and auto_vacuum cannot change after); checked against the output at the end
    out.execute("PRAGMA page_size=%d" % keep["page_size"])
    out.execute("PRAGMA auto_vacuum=%d" % keep["auto_vacuum"])
    if keep["encoding"] != "UTF-8":
        out.execute("PRAGMA encoding='%s'" % keep["encoding"])
    out.execute("PRAGMA user_version=%d" % keep["user_version"])
    out.execute("PRAGMA application_id=%d" % keep["application_id"])
    rows = s.schema.schema_rows
    tables = s.schema.tables
    fts_names = [t.name for t in tables.values() if t.virtual]
    fts_re = re.compile(r"(?i)(?<![\w$])[\"`\[]?(%s)[\"`\]]?(?![\w$])" % "|".join(
        re.escape(n) for n in fts_names)) if fts_names else None

    def refs_fts(sql):
        return bool(fts_re and sql and fts_re.search(sql))

    out.execute("BEGIN")
    for t in tables.values():
        if t.target:
            out.execute(t.sql)
    views = [r for r in rows if r["type"] == "view" and r["sql"]]
    for v in views:
        if s.args.fts == "leave-to-hermes" and refs_fts(v["sql"]):
            continue
        try:
            out.execute(v["sql"])
        except sqlite3.Error as e:
            s.notes.append("view %s not created: %s" % (v["name"], e))
    indexes = [r for r in rows if r["type"] == "index" and r["sql"]]
    unique_idx = [r for r in indexes if re.match(r"\s*CREATE\s+UNIQUE", r["sql"], re.I)]
    other_idx = [r for r in indexes if r not in unique_idx]
    triggers = [r for r in rows if r["type"] == "trigger" and r["sql"]]
    fts_triggers = [r for r in triggers if refs_fts(r["sql"])]
    other_triggers = [r for r in triggers if r not in fts_triggers]
    out.execute("COMMIT")
    fts.plan_builds(s, fts_names)
    out.execute("BEGIN")
    _create_each(s, unique_idx, "index")
    out.execute("COMMIT")
    # rows
    for name in load_order(s):
        load_table(s, s.schema.states[name])
    apply_repairs(s)
    index_evidence.judge_saved(s)
    fk_fix(s)
    check_against_copies(s)
    out.execute("BEGIN")
    _create_each(s, other_idx, "index")
    _create_each(s, other_triggers, "trigger")
    out.execute("COMMIT")
    copy_sequence(s)
    if s.fts.jobs:
        t = time.monotonic()
        ftsbuild.build_fts(s)
        s.tick("fts_build", t)


def _create_each(s, rows, kind):
    """Run each schema row's DDL in the output; one that fails is a note, not a failed salvage."""
    for r in rows:
        try:
            s.dest.out.execute(r["sql"])
        except sqlite3.Error as e:
            s.notes.append("%s %s not created: %s" % (kind, r["name"], e))


def check_against_copies(s):
    """Rows whose content disagrees with the source's own copies of it: an FTS table that
    keeps its own content (an inline `_content` shadow table) holds, per row, what its
    insert trigger computed from the row. A row that every copy holding it contradicts
    has changed since it was written (or all its copies have): flagged as suspect. A copy the row agrees with outvotes one it does not
    (then the index was damaged, and it is rebuilt anyway)."""
    if s.schema.src is None:
        return
    votes = {}          # (table, rowid) -> [copies present, copies disagreeing]
    try:
        s.dest.out.execute("ATTACH DATABASE ? AS fleetops_src",
                      (file_uri(s.report["image"]["path"], mode="ro", immutable="1"),))
    except sqlite3.Error as e:
        s.notes.append("content not checked against its FTS copies: %s" % e)
        return
    try:
        for name, trigs in fts.fts_triggers(s).items():
            content = name + "_content"
            if content not in s.schema.tables:
                continue
            for r in trigs:
                parsed = fts.trigger_insert(r["sql"], name)
                tn = r.get("tbl_name")
                if (parsed is None or tn not in s.schema.states
                        or not re.search(r"(?i)\bAFTER\s+INSERT\b", r["sql"])):
                    continue
                cols, exprs = parsed
                vote(s, votes, tn, name, content, cols, exprs)
                break       # one vote per copy
    finally:
        s.dest.out.execute("DETACH DATABASE fleetops_src")
    for (tn, rowid), (present, against) in sorted(votes.items()):
        if against and against == present:
            st = s.schema.states[tn]
            st.suspect.setdefault(rowid, []).append(
                "its content disagrees with %s of its FTS cop%s in the source"
                % ("the one" if present == 1 else "all %d" % present,
                   "y" if present == 1 else "ies"))


def vote(s, votes, tn, name, content, cols, exprs):
    """One FTS copy's votes on the rows of table tn (see _check_against_copies)."""
    if cols[0].lower() != "rowid" or len(cols) != len(exprs):
        return
    m = re.search(r"(?is)\busing\s+fts5\s*\(", s.schema.tables[name].sql or "")
    args = fts.split_args(s.schema.tables[name].sql[m.end():]) if m else None
    if args is None:
        return
    # the declared columns, in order (c0, c1, ... of the content table); options have '='
    fts_cols = [a.split()[0].strip('"`[]') for a in args if a and "=" not in a]
    idx = []
    for c in cols[1:]:
        if c not in fts_cols:
            return
        idx.append("c%d" % fts_cols.index(c))
    sub = [re.sub(r"(?i)\bnew\.", "m.", e) for e in exprs]
    same = " AND ".join("f.%s IS (%s)" % (c, e) for c, e in zip(idx, sub[1:])) or "1"
    sql = ("SELECT m.rowid, (%s) FROM main.%s AS m NOT INDEXED JOIN fleetops_src.%s AS f "
           "ON f.id = (%s) WHERE m.rowid BETWEEN ? AND ?" % (same, quote_ident(tn), quote_ident(content), sub[0]))
    keys = [r[0] for r in s.dest.out.execute("SELECT rowid FROM main.%s NOT INDEXED ORDER BY rowid"
                                        % quote_ident(tn))]
    todo = [keys[i:i + 256] for i in range(0, len(keys), 256)]
    unread = 0
    while todo:
        part = todo.pop()
        try:
            rows = s.dest.out.execute(sql, (part[0], part[-1])).fetchall()
        except sqlite3.Error:
            if len(part) == 1:
                unread += 1         # this row's copy is on a damaged page
            else:
                todo += [part[:len(part) // 2], part[len(part) // 2:]]
            continue
        for row in rows:
            v = votes.setdefault((tn, row[0]), [0, 0])
            v[0] += 1
            if not row[1]:
                v[1] += 1
    if unread:
        s.notes.append("%s: %d rows not checked against %s (that copy unreadable)"
                       % (tn, unread, name))


def foreign_ranges(s, st):
    """Key ranges where SQLite's walk of this table read a page another tree owns (or a
    leaf whose keys do not fit): rows it returned there may be another table's."""
    w = s.scan.classes["walks"].get(st.t.name) if hasattr(s, "classes") else None
    if w is None:
        return []
    out = [(d.get("key_lo"), d.get("key_hi")) for d in w.double_refs
           if d.get("first_owner") not in (None, st.t.name)]
    out += [(i.get("key_lo"), i.get("key_hi")) for i in w.bad_pages.values()
            if i.get("foreign_leaf")]
    return out


def load_plan(s, st):
    """Rows to insert, in key order: per key, every version in order of evidence (seen
    by SQLite's walk and on the table's own leaves first; a walk row read through another
    tree's page last; then more copies, then the lowest page); extra instances are
    duplicates. The load tries them in that order until one goes in."""
    plan = []
    st.duplicates = 0
    st.conflicts = 0
    st.page_scan_only = 0
    st.identified = 0
    foreign = foreign_ranges(s, st)
    judge = index_evidence.judge_for(s, st)

    def in_foreign(k):
        return not isinstance(k, tuple) and any(
            (lo is None or k > lo) and (hi is None or k <= hi) for lo, hi in foreign)

    for rowid in sorted(st.keys, key=lambda k: (isinstance(k, tuple), k if not isinstance(k, tuple) else 0, str(k))):
        doubtful = in_foreign(rowid)
        theirs = st.foreign_cells.get(rowid, ())
        for ck, v in list(st.keys[rowid].items()):
            if v.walk and not v.lineage and not v.cells and ck in theirs:
                # SQLite read it from a page that belongs to another table: not a row
                # of this one (the page's own table has it)
                del st.keys[rowid][ck]
                st.foreign_read += 1
                walk.quarantine(s, st.t.name, rowid, v.values,
                                 "read through a page of another table: SQLite's walk of "
                                 "%s returned it from page %s" % (st.t.name, theirs[ck]),
                                 count=False)
        if not st.keys[rowid]:
            continue
        versions = sorted(st.keys[rowid].values(),
                          key=lambda v: (index_evidence.version_rank(judge, rowid, v),
                                         doubtful and v.walk and not v.lineage, bool(v.suspect),
                                         not v.walk, not v.lineage, -v.instances,
                                         v.first_page or 0))
        for v in versions:
            st.identified += v.instances
            st.duplicates += v.instances - 1
            if not v.walk:
                st.page_scan_only += 1
        plan.append((rowid, versions))
    return plan


def insert_sql(s, sql, p):
    """The INSERT for these parameters: text that is not valid UTF-8 is bound as its bytes
    and cast to TEXT, so it is stored exactly as it was, as TEXT."""
    if not any(isinstance(x, InvalidText) for x in p):
        return sql
    head, _sep, _tail = sql.rpartition("VALUES (")
    return head + "VALUES (" + ", ".join(
        "CAST(? AS TEXT)" if isinstance(x, InvalidText) else "?" for x in p) + ")"


def params(s, t, rowid, v):
    if t.alias is None and not t.without_rowid:
        return [rowid] + list(v.values)
    return list(v.values)


def load_table(s, st):
    t = st.t
    out = s.dest.out
    plan = load_plan(s, st)
    cols = list(t.columns)
    if t.alias is None and not t.without_rowid:
        sql = "INSERT INTO %s(rowid, %s) VALUES (?%s)" % (
            quote_ident(t.name), ", ".join(quote_ident(c) for c in cols), ", ?" * len(cols))
    else:
        sql = "INSERT INTO %s(%s) VALUES (%s)" % (
            quote_ident(t.name), ", ".join(quote_ident(c) for c in cols), ", ".join("?" * len(cols)))
    st.deferred = []
    for b in range(0, len(plan), s.args.batch):
        part = plan[b:b + s.args.batch]
        single = [(rowid, vs[0]) for rowid, vs in part if len(vs) == 1
                  and not vs[0].suspect
                  and not any(isinstance(x, InvalidText) for x in vs[0].values)]
        out.execute("BEGIN")
        try:
            out.execute("SAVEPOINT batch")
            out.executemany(sql, [params(s, t, rowid, v) for rowid, v in single])
            out.execute("RELEASE batch")
        except sqlite3.DatabaseError:
            out.execute("ROLLBACK TO batch")
            out.execute("RELEASE batch")
            for rowid, v in single:
                insert_one(s, st, sql, rowid, v, params(s, t, rowid, v))
        for rowid, vs in part:
            if len(vs) > 1:
                insert_versions(s, st, sql, rowid, vs)
            elif vs[0].suspect or any(isinstance(x, InvalidText) for x in vs[0].values):
                insert_one(s, st, sql, rowid, vs[0], params(s, t, rowid, vs[0]))
        out.execute("COMMIT")


def insert_versions(s, st, sql, rowid, versions):
    """Two or more versions of one key: try each in order of evidence until one goes in
    (constraints and, for a NOT NULL reference, its parent row); quarantine the others.
    A version that fails only a repairable NOT NULL is kept for the repair pass when no
    other version goes in."""
    t = st.t
    failed = []
    chosen = None
    repairable = None
    for v in versions:
        why = missing_parent(s, t, v.values)
        if why is None:
            n_def = len(st.deferred)
            if insert_one(s, st, sql, rowid, v, params(s, t, rowid, v), quiet=True):
                chosen = v
                break
            if len(st.deferred) > n_def:
                repairable = repairable or st.deferred.pop()
                why = "NOT NULL constraint failed: %s.%s" % (t.name, repairable[4])
            else:
                why = s.dest.last_insert_error
        failed.append((v, why))
    if chosen is None and repairable is not None:
        st.deferred.append(repairable)
        chosen = repairable[1]
    kept = ("the version that %s" % ("went in" if chosen is not None and repairable is None
                                     or chosen is not repairable[1] else "is repaired")
            if chosen is not None else None)
    for v in versions:
        if v is chosen:
            continue
        st.conflicts += 1
        why = dict((id(x), w) for x, w in failed).get(id(v))
        walk.quarantine(s, t.name, rowid, v.values,
                         "conflicting version: same key %s, different content; %s%s" % (
                             rowid, "kept %s" % kept if kept else "no version went in",
                             "; this one: %s" % why if why else ""),
                         page=v.first_page)


def missing_parent(s, t, values):
    """Why a row's NOT NULL reference has no parent in the output yet, or None."""
    for ci, ptable, pcol in notnull_fks(s, t):
        val = values[ci]
        if val is None or ptable not in s.schema.states:
            continue
        try:
            if one_row(s.dest.out, "SELECT 1 FROM %s WHERE %s = ? LIMIT 1"
                    % (quote_ident(ptable), quote_ident(pcol)), (val,)) is None:
                return "FOREIGN KEY: no %s row with %s = %r" % (ptable, pcol, val)
        except sqlite3.Error:
            return None
    return None


def notnull_fks(s, t):
    cache = s.dest.fk_cache
    if t.name not in cache:
        out = []
        try:
            for f in s.dest.out.execute("PRAGMA foreign_key_list(%s)" % quote_ident(t.name)).fetchall():
                col, ptable, pcol = f[3], f[2], f[4]
                if col in t.columns and t.notnull[t.columns.index(col)]:
                    if pcol is None and ptable in s.schema.tables:
                        pt = s.schema.tables[ptable]
                        pcol = pt.columns[pt.alias] if pt.alias is not None else "rowid"
                    out.append((t.columns.index(col), ptable, pcol or "rowid"))
        except sqlite3.Error:
            pass
        cache[t.name] = out
    return cache[t.name]


def insert_one(s, st, sql, rowid, v, p, quiet=False):
    t = st.t
    try:
        s.dest.out.execute("SAVEPOINT one")
        s.dest.out.execute(insert_sql(s, sql, p), p)
        s.dest.out.execute("RELEASE one")
        if any(isinstance(x, InvalidText) for x in p):
            st.invalid_text.append(rowid)
        if v.suspect:
            st.suspect[rowid] = list(v.suspect)
        return True
    except sqlite3.DatabaseError as e:
        s.dest.out.execute("ROLLBACK TO one")
        s.dest.out.execute("RELEASE one")
        msg = str(e)
        m = re.match(r"NOT NULL constraint failed: [^.]+\.(\S+)", msg)
        if m and (t.name, m.group(1)) in s.args.rules.repairs:
            st.deferred.append((rowid, v, p, sql, m.group(1)))
            return False
        if msg.startswith("UNIQUE constraint failed"):
            reason = "%s: kept the first row (lowest key) with this value" % msg
        else:
            reason = msg
        s.dest.last_insert_error = reason
        if not quiet:
            walk.quarantine(s, t.name, rowid, v.values, reason, page=v.first_page)
        return False


def apply_repairs(s):
    """Documented NOT NULL repairs, run once every table is loaded (they read neighbours)."""
    for name in load_order(s):
        st = s.schema.states[name]
        for rowid, v, p, sql, col in getattr(st, "deferred", []):
            t = st.t
            rule = s.args.rules.repairs[(t.name, col)]
            vals = list(v.values)
            try:
                new, why = rule(s.dest.out, (rowid, vals, t.columns))
            except sqlite3.Error as e:
                new, why = None, None
                s.notes.append("repair rule %s.%s failed: %s" % (t.name, col, e))
            if new is None:
                walk.quarantine(s, t.name, rowid, vals, "NOT NULL constraint failed: %s.%s: "
                                 "no value to repair from" % (t.name, col), page=v.first_page)
                continue
            ci = t.columns.index(col)
            vals[ci] = new
            p = list(p)
            p[ci + (len(p) - len(vals))] = new
            s.dest.out.execute("BEGIN")
            ok = insert_one(s, st, sql, rowid, Version(vals), p)
            s.dest.out.execute("COMMIT")
            if ok:
                st.repaired.append({"rowid": rowid, "column": col, "value": new, "rule": why})


def fk_fix(s):
    """Foreign keys: a nullable reference to a missing parent becomes NULL (repaired);
    a NOT NULL one (messages.session_id) sends the row to quarantine."""
    out = s.dest.out
    for _ in range(10):
        try:
            bad = out.execute("PRAGMA foreign_key_check").fetchall()
        except sqlite3.Error as e:
            s.notes.append("foreign_key_check failed: %s" % e)
            return
        if not bad:
            return
        out.execute("BEGIN")
        for table, rowid, parent, fkid in bad:
            st = s.schema.states.get(table)
            fks = [f for f in out.execute("PRAGMA foreign_key_list(%s)" % quote_ident(table)).fetchall()
                   if f[0] == fkid]
            from_cols = [f[3] for f in fks]
            t = s.schema.tables[table]
            row = one_row(out, "SELECT * FROM %s WHERE rowid = ?" % quote_ident(table), (rowid,))
            if row is None:
                continue
            nullable = all(not t.notnull[t.columns.index(c)] for c in from_cols
                           if c in t.columns)
            if nullable and from_cols:
                out.execute("UPDATE %s SET %s WHERE rowid = ?" % (
                    quote_ident(table), ", ".join("%s = NULL" % quote_ident(c) for c in from_cols)), (rowid,))
                if st is not None:
                    st.repaired.append({"rowid": rowid, "column": ",".join(from_cols),
                                        "value": None, "was": [row[t.columns.index(c)]
                                                               for c in from_cols],
                                        "rule": "reference to missing %s row set to NULL" % parent})
            else:
                out.execute("DELETE FROM %s WHERE rowid = ?" % quote_ident(table), (rowid,))
                walk.quarantine(s, table, rowid, list(row), "FOREIGN KEY: parent row in %s is "
                                 "missing (orphan)" % parent)
        out.execute("COMMIT")


def copy_sequence(s):
    if "sqlite_sequence" not in s.schema.tables or s.schema.src is None:
        return
    try:
        seqs = s.schema.src.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
    except sqlite3.Error as e:
        s.notes.append("sqlite_sequence unreadable: %s" % e)
        return
    try:
        s.dest.out.execute("BEGIN")
        for name, seq in seqs:
            if not isinstance(seq, int):
                continue
            cur = one_row(s.dest.out, "SELECT seq FROM sqlite_sequence WHERE name = ?",
                                   (name,))
            if cur is None:
                s.dest.out.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)",
                              (name, seq))
            elif cur[0] < seq:
                s.dest.out.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (seq, name))
        s.dest.out.execute("COMMIT")
    except sqlite3.Error as e:
        s.dest.out.execute("ROLLBACK")
        s.notes.append("sqlite_sequence not copied: %s" % e)
