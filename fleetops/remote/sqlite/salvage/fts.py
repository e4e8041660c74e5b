"""The FTS tables of the output (fts=rebuild): each built by the source's own triggers in a
private scratch database, several at once, then copied in with its triggers; or, where that
cannot be prepared, created before the rows and filled one by one as they go in.
"""
import os
import re
import sqlite3
import threading
import time

from fleetops.remote.sqlite.salvage.ftscheck import fts_config_rows, keep_fts_config
from fleetops.remote.sqlite.salvage.rules import load_order
from fleetops.remote.sqlite.salvage.sqlutil import schema_names, file_uri
from fleetops.remote.sqlite.sql import quote_ident


def plan_builds(s, fts_names):
    """Each FTS table's build, once the output's tables exist: a scratch build after the rows
    (one started from the image if the speculation has it), or created now so its triggers index
    the rows as they go in; with fts=leave-to-hermes, none."""
    if s.args.fts == "rebuild":
        by_table = fts_triggers(s)
        for name in fts_names:
            trigs = by_table[name]
            job, why = s.fts.spec.get(name), None
            if job is None and trigs and s.args.fts_build == "scratch":
                job, why = fts_prepare(s, name, trigs)
            if job is not None:
                # built by its triggers from the final rows, after they are all in
                s.fts.jobs.append(job)
                continue
            # fallback: FTS before the rows, so the source's own triggers index them
            # one by one as they go in
            create_fts(s, name, trigs)
            rep = s.fts.report[name]
            if why:
                rep["build"] = "triggers"
                rep["scratch_unavailable"] = why
                if rep["created"]:
                    s.notes.append("FTS table %s: scratch build unavailable (%s); "
                                   "indexed by its triggers during the load" % (name, why))
    else:
        for name in fts_names:
            s.fts.report[name] = {"mode": "leave-to-hermes", "created": False}


def create_fts(s, name, trigs):
    out = s.dest.out
    t = s.schema.tables[name]
    rep = {"mode": "rebuild", "created": False, "triggers": [r["name"] for r in trigs],
           "build": "triggers"}
    s.fts.report[name] = rep
    if not trigs:
        rep["mode"] = "leave-to-hermes"
        rep["reason"] = "source has no sync trigger for it; never an FTS table without triggers"
        return
    try:
        out.execute("SAVEPOINT fts")
        out.execute(t.sql)
        for r in trigs:
            out.execute(r["sql"])
        if name + "_config" in schema_names(out, "table"):
            cfg = keep_fts_config(s, out, name, fts_config_rows(out, name + "_config"))
            s.fts.config_expected[name] = cfg
        out.execute("RELEASE fts")
        rep["created"] = True
        s.fts.created.append(name)
    except sqlite3.Error as e:
        out.execute("ROLLBACK TO fts")
        out.execute("RELEASE fts")
        rep["mode"] = "leave-to-hermes"
        rep["reason"] = "host SQLite cannot create it (%s); left for Hermes to rebuild" % e
        s.notes.append("FTS table %s: %s" % (name, rep["reason"]))


def fts_triggers(s):
    """{FTS table: the triggers that name it}, from the schema rows."""
    rows = s.schema.schema_rows
    fts_names = [t.name for t in s.schema.tables.values() if t.virtual]
    if not fts_names:
        return {}
    fts_re = re.compile(r"(?i)(?<![\w$])[\"`\[]?(%s)[\"`\]]?(?![\w$])" % "|".join(
        re.escape(n) for n in fts_names))
    triggers = [r for r in rows if r["type"] == "trigger" and r["sql"]
                and fts_re.search(r["sql"])]
    out = {}
    for name in fts_names:
        one = re.compile(r"(?i)(?<![\w$])[\"`\[]?%s[\"`\]]?(?![\w$])" % re.escape(name))
        out[name] = [r for r in triggers if one.search(r["sql"])]
    return out


def trigger_reads(trigs, table):
    """Whether any of these triggers names `table` in its body."""
    one = re.compile(r"(?i)(?<![\w$])[\"`\[]?%s[\"`\]]?(?![\w$])" % re.escape(table))
    return any(one.search(r["sql"]) for r in trigs)


def tree_bytes(s, names):
    """Bytes the source's pages of these trees take (page scan ownership)."""
    if s.fts.owner_pages is None:
        counts = {}
        for info in s.scan.classes["pages"].values():
            if info["owner"] is not None:
                counts[info["owner"]] = counts.get(info["owner"], 0) + 1
        s.fts.owner_pages = counts
    return sum(s.fts.owner_pages.get(n, 0) for n in names) * s.image.reader.page_size


def fts_prepare(s, name, trigs, est_bytes=None):
    """Scratch database for FTS table `name`: the tables its triggers are on, the FTS
    table and its triggers, all from the source's DDL, still empty.

    Returns (job, None), or (None, why) when the scratch build cannot be used (the
    caller then falls back to the triggers-during-the-load path)."""
    ft = s.schema.tables[name]
    on = []
    for r in trigs:
        tn = r.get("tbl_name")
        t = s.schema.tables.get(tn)
        if t is None or tn not in s.schema.states or t.without_rowid:
            return None, "trigger %s is on %r, not a salvaged rowid table" % (r["name"], tn)
        if tn not in on:
            on.append(tn)
    order = load_order(s)
    on.sort(key=order.index)
    # tables the triggers read (a WHEN clause on state_meta keys): in the scratch database
    # too, with their salvaged rows, loaded first so the triggers decide as in the output
    reads = [tn for tn in order if tn not in on and trigger_reads(trigs, tn)]
    for tn in reads:
        if s.schema.tables[tn].without_rowid:
            return None, "the triggers read %r, a WITHOUT ROWID table" % tn
    on = reads + on
    if est_bytes is None:
        shadows_src = [t.name for t in s.schema.tables.values() if t.shadow_of == name]
        est = tree_bytes(s, on + shadows_src)
    else:
        est = est_bytes
    try:
        st = os.statvfs(os.path.dirname(s.args.output))
        free = st.f_bavail * st.f_frsize
    except (OSError, AttributeError):
        free = None
    reserved = sum(j.est_bytes for j in s.fts.jobs)
    need = s.report["image"]["size"] + int(1.5 * (reserved + est))
    if free is not None and free < need:
        return None, ("%d MB free beside the output, about %d MB needed with scratch "
                      "databases" % (free >> 20, need >> 20))
    job = _FtsJob(name, trigs, on, est)
    s.fts.scratch_n += 1
    job.path = os.path.join(s.scratch_dir(), "fts-%d.db" % s.fts.scratch_n)
    con = None
    try:
        con = sqlite3.connect(job.path, isolation_level=None)
        # big pages: fewer pages and system calls for the bulk build (measured ~6% less
        # CPU); the FTS rows are the same bytes on any page size
        con.execute("PRAGMA page_size=65536")
        con.execute("BEGIN")
        for tn in on:
            con.execute(s.schema.tables[tn].sql)
        before = schema_names(con)
        con.execute(ft.sql)
        job.shadows = sorted(n for n in schema_names(con, "table") - before if n != name)
        for r in trigs:
            con.execute(r["sql"])
        cfg = name + "_config"
        if cfg in job.shadows:
            job.config = fts_config_rows(con, cfg)
        con.execute("COMMIT")
        # FTS5 bulk settings: only in the scratch database; its _config table is not
        # copied, so the output keeps the rows its own CREATE VIRTUAL TABLE wrote
        if (s.args.fts_build_config and job.config is not None
                and re.search(r"(?i)\busing\s+fts5\b", ft.sql)):
            try:
                for k, v in s.args.fts_build_config:
                    con.execute("INSERT INTO %s(%s, rank) VALUES (?, ?)" % (quote_ident(name), quote_ident(name)),
                                (k, v))
                job.tweaked = dict(s.args.fts_build_config)
            except sqlite3.Error as e:
                job.tweak_error = str(e)
        return job, None
    except (sqlite3.Error, OSError) as e:
        return None, "cannot prepare it: %s" % e
    finally:
        if con is not None:
            con.close()


def run_fts_job(s, job):
    """Fill the scratch FTS table: every salvaged row of the tables its triggers are on,
    in key order, through one INSERT .. SELECT that fires the source's triggers.

    Runs in a worker thread (own connection; sqlite3 releases the GIL while it steps).
    The rows are first copied into the scratch database in one short read of the output,
    so the output is free for the main thread while the index is built."""
    t0 = time.monotonic()
    c0 = _thread_cpu()
    con = sqlite3.connect(file_uri(job.path), uri=True, isolation_level=None,
                          check_same_thread=False)
    job.con = con
    try:
        if job.stop:
            raise sqlite3.OperationalError("speculative build stopped")
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "main.locking_mode=EXCLUSIVE"):
            con.execute("PRAGMA " + pragma).fetchall()
        if job.from_image:
            # speculative: the image's rows, in key order, through the same kind of
            # statement as below; kept only if they prove to be the final rows
            con.execute("ATTACH DATABASE ? AS fleetops_img",
                        (file_uri(s.report["image"]["path"], mode="ro", immutable="1"),))
            con.execute("BEGIN")
            for tn in job.on:
                t = s.schema.tables[tn]
                cols = ", ".join(quote_ident(c) for c in t.columns)
                if t.alias is None:
                    con.execute("INSERT INTO main.%s(rowid, %s) SELECT rowid, %s FROM "
                                "fleetops_img.%s NOT INDEXED ORDER BY rowid"
                                % (quote_ident(tn), cols, cols, quote_ident(tn)))
                else:
                    con.execute("INSERT INTO main.%s(%s) SELECT %s FROM fleetops_img.%s "
                                "NOT INDEXED ORDER BY rowid" % (quote_ident(tn), cols, cols, quote_ident(tn)))
            con.execute("COMMIT")
            if job.stop:
                raise sqlite3.OperationalError("speculative build stopped")
            job.seconds = time.monotonic() - t0
            job.cpu_seconds = _thread_cpu() - c0 if c0 is not None else None
            return
        con.execute("ATTACH DATABASE ? AS fleetops_out", (file_uri(s.dest.tmp_out, mode="ro"),))
        con.execute("BEGIN")
        for i, tn in enumerate(job.on):
            cols = ", ".join(quote_ident(c) for c in s.schema.tables[tn].columns)
            con.execute("CREATE TABLE main.fleetops_rows_%d AS SELECT rowid AS fleetops_rowid, "
                        "%s FROM fleetops_out.%s ORDER BY rowid" % (i, cols, quote_ident(tn)))
        con.execute("COMMIT")
        con.execute("DETACH DATABASE fleetops_out")
        con.execute("BEGIN")
        for i, tn in enumerate(job.on):
            t = s.schema.tables[tn]
            cols = ", ".join(quote_ident(c) for c in t.columns)
            if t.alias is None:
                con.execute("INSERT INTO main.%s(rowid, %s) SELECT fleetops_rowid, %s FROM "
                            "main.fleetops_rows_%d ORDER BY fleetops_rowid"
                            % (quote_ident(tn), cols, cols, i))
            else:
                con.execute("INSERT INTO main.%s(%s) SELECT %s FROM main.fleetops_rows_%d "
                            "ORDER BY fleetops_rowid" % (quote_ident(tn), cols, cols, i))
        con.execute("COMMIT")
    finally:
        with job.lock:
            job.con = None
            con.close()
    job.seconds = time.monotonic() - t0
    job.cpu_seconds = _thread_cpu() - c0 if c0 is not None else None


def install_fts(s, job):
    """The FTS table from the source's DDL, its shadow tables' rows copied as they are
    from the scratch build, then its triggers: one transaction, never one without the
    other."""
    out = None
    name = job.name
    rep = {"mode": "rebuild", "created": False, "triggers": [r["name"] for r in job.trigs],
           "build": "scratch", "build_s": round(job.seconds or 0, 3),
           "rows_from": "image (speculative, proved identical)" if job.from_image else "output"}
    if job.cpu_seconds is not None:
        rep["build_cpu_s"] = round(job.cpu_seconds, 3)
    if job.tweaked:
        rep["build_config"] = job.tweaked
    if job.tweak_error:
        rep["build_config_error"] = job.tweak_error
    s.fts.report[name] = rep
    if job.error is None:
        try:
            # its own connection: the one that loads the rows never instantiates the
            # FTS table (its cached index structure would be that of the empty table)
            out = sqlite3.connect(s.dest.tmp_out, isolation_level=None, timeout=600)
            out.execute("PRAGMA synchronous=OFF")      # as the load: synced at the end
            out.execute("ATTACH DATABASE ? AS fleetops_fts", (job.path,))
        except sqlite3.Error as e:
            job.error = "cannot attach the scratch build: %s" % e
            if out is not None:
                out.close()
    if job.error is None:
        try:
            out.execute("BEGIN")
            before = schema_names(out)
            out.execute(s.schema.tables[name].sql)
            shadows = sorted(n for n in schema_names(out, "table") - before if n != name)
            if shadows != job.shadows:
                raise sqlite3.DatabaseError("shadow tables differ from the scratch build: "
                                            "%s != %s" % (shadows, job.shadows))
            for sname in shadows:
                if job.tweaked and sname == name + "_config":
                    continue       # keep the rows CREATE VIRTUAL TABLE just wrote
                out.execute("DELETE FROM main.%s" % quote_ident(sname))
                out.execute("INSERT INTO main.%s SELECT * FROM fleetops_fts.%s"
                            % (quote_ident(sname), quote_ident(sname)))
            for r in job.trigs:
                out.execute(r["sql"])
            cfg = keep_fts_config(s, out, name, job.config)
            out.execute("COMMIT")
            rep["created"] = True
            s.fts.created.append(name)
            if job.from_image and "fts_speculation" in s.report:
                s.report["fts_speculation"]["tables"].append(name)
            if cfg is not None:
                s.fts.config_expected[name] = cfg
        except sqlite3.Error as e:
            out.execute("ROLLBACK")
            job.error = "scratch build not installed: %s" % e
        out.close()
    if job.error is not None:
        rep["mode"] = "leave-to-hermes"
        rep["reason"] = "%s; left for Hermes to rebuild" % job.error
        s.notes.append("FTS table %s: %s" % (name, rep["reason"]))


class _FtsJob(object):
    """One FTS table built in a scratch database (see Salvage._build_fts)."""

    def __init__(self, name, trigs, on, est_bytes):
        self.name = name
        self.trigs = trigs
        self.on = on                  # the tables its triggers are on, in load order
        self.est_bytes = est_bytes
        self.path = None
        self.shadows = []
        self.config = None            # its _config rows as CREATE VIRTUAL TABLE wrote them
        self.tweaked = None
        self.tweak_error = None
        self.error = None
        self.seconds = None
        self.cpu_seconds = None
        self.from_image = False       # speculative: its rows read from the image
        self.future = None            # its speculative build, while one is pending
        self.spec_error = None
        self.con = None               # the building connection (to interrupt it)
        self.lock = threading.Lock()  # held to interrupt or to close that connection
        self.stop = False
        self.priority = 0             # which speculative build starts first


def fdatasync_path(path):
    """Ask the kernel to write a file back now (an early flush; never the durability proof)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        pass


def cpus():
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _thread_cpu():
    try:
        return time.thread_time()
    except (AttributeError, OSError):
        return None


def trigger_insert(sql, fts_name):
    """(columns, value expressions) of the `INSERT INTO fts_name(...) VALUES (...)` in a
    trigger's SQL, split at top-level commas; None if it has no such statement."""
    m = re.search(r"(?is)INSERT\s+INTO\s+[\"`\[]?%s[\"`\]]?\s*\(([^)]*)\)\s*VALUES\s*\("
                  % re.escape(fts_name), sql or "")
    if not m:
        return None
    cols = [c.strip().strip('"`[]') for c in m.group(1).split(",")]
    exprs = split_args(sql[m.end():])
    return None if exprs is None else (cols, exprs)


def split_args(text):
    """The comma-separated items up to the parenthesis that closes the one just before
    ``text`` (quotes and nested parentheses respected), or None if it never closes."""
    exprs, depth, cur, quote = [], 0, "", None
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                exprs.append(cur.strip())
                return exprs
            depth -= 1
        elif ch == "," and depth == 0:
            exprs.append(cur.strip())
            cur = ""
            continue
        cur += ch
    return None
