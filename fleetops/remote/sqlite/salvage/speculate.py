"""FTS builds started early from the image, while the rows are still being found, and kept
only when the final rows prove identical to what they read.
"""
import concurrent.futures
import functools
import os
import re
import sqlite3
import time

from fleetops.remote.sqlite.salvage import fts
from fleetops.remote.sqlite.salvage.sqlutil import file_uri
from fleetops.remote.sqlite.sql import quote_ident


def speculate_fts(s):
    if (s.args.fts != "rebuild" or s.args.fts_build != "scratch" or not s.args.fts_speculate
            or s.schema.src is None):
        return
    workers = s.args.fts_workers or fts.cpus()
    if workers < 2:
        return          # no spare core: the page scan would only be slowed down
    size = s.report["image"]["size"]
    try:
        st = os.statvfs(os.path.dirname(s.args.output))
        if st.f_bavail * st.f_frsize < 4 * size:
            return
    except (OSError, AttributeError):
        return
    by_table = fts.fts_triggers(s)
    jobs = []
    for name, trigs in by_table.items():
        if not trigs:
            continue
        # which to start first, on too few cores for all (the source's FTS sizes are
        # not known yet, and may be garbage): a trigram index takes a token per
        # character, several times the work of a word tokenizer
        weight = 5 if re.search(r"(?i)\btrigram\b", s.schema.tables[name].sql or "") else 1
        job, _why = fts.fts_prepare(s, name, trigs, est_bytes=size)   # an upper bound
        if job is not None:
            job.from_image = True
            job.priority = weight
            jobs.append(job)
    if not jobs:
        return
    s.fts.spec_state = "running"
    s.fts.spec_pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers - 1)
    for job in sorted(jobs, key=lambda j: -j.priority):
        job.future = s.fts.spec_pool.submit(functools.partial(run_spec_job, s), job)
        s.fts.spec[job.name] = job


def run_spec_job(s, job):
    try:
        fts.run_fts_job(s, job)
    except (sqlite3.Error, OSError) as e:
        job.spec_error = str(e)
    return job


def stop_speculation(s, why):
    """Stop every speculative build (interrupting those running); their tables are built
    from the output instead."""
    if s.fts.spec_state != "running":
        return
    s.fts.spec_state = "stopped"
    s.report["fts_speculation"] = {"used": False, "why": why}
    for job in s.fts.spec.values():
        job.stop = True
        job.future.cancel()
    for job in s.fts.spec.values():
        # an interrupt between two statements is lost: repeat it until the build ends
        while not job.future.done():
            with job.lock:
                if job.con is not None:
                    try:
                        job.con.interrupt()
                    except sqlite3.Error:
                        pass
            concurrent.futures.wait([job.future], timeout=0.05)
    s.fts.spec_pool.shutdown(wait=True)


def speculation_damage_check(s):
    """After the page scan and the walk: damage in a table the FTS triggers are on means
    its final rows will differ from the image's; stop speculating now (saves the CPU)."""
    if s.fts.spec_state != "running":
        return
    on = set()
    for job in s.fts.spec.values():
        on.update(job.on)
    for tn in sorted(on):
        st = s.schema.states[tn]
        if (st.bad_pages or st.bad_cells or st.orphan_pages or st.double_refs
                or st.walk_bad_ranges or st.walk_errors or st.undecodable):
            stop_speculation(s, "damage found in %s" % tn)
            return


def rows_match_image(s, tn):
    """The output's rows of table tn are exactly the image's: the same rowids, each row
    with the same values of the same types (text compared byte for byte, numbers exactly),
    as a speculative build read them. Compared by SQLite on a connection of its own."""
    t = s.schema.tables[tn]
    same = " AND ".join(
        "a.{c} IS b.{c} AND typeof(a.{c}) = typeof(b.{c}) "
        "AND CAST(a.{c} AS BLOB) IS CAST(b.{c} AS BLOB)".format(c=quote_ident(c)) for c in t.columns)
    con = None
    try:
        con = sqlite3.connect(file_uri(s.report["image"]["path"], mode="ro", immutable="1"),
                              uri=True)
        con.execute("ATTACH DATABASE ? AS fleetops_out", (file_uri(s.dest.tmp_out, mode="ro"),))
        n_out, n_img, n_same = con.execute(
            "SELECT (SELECT count(*) FROM fleetops_out.{t} NOT INDEXED), "
            "(SELECT count(*) FROM main.{t} NOT INDEXED), "
            "(SELECT count(*) FROM fleetops_out.{t} AS a NOT INDEXED "
            "JOIN main.{t} AS b NOT INDEXED ON b.rowid = a.rowid WHERE {same})".format(
                t=quote_ident(tn), same=same or "1")).fetchone()
        return n_out == n_img == n_same
    except sqlite3.Error:
        return False
    finally:
        if con is not None:
            con.close()


def settle_speculation(s):
    """At the FTS phase, the rows final: keep the speculative builds if their input was
    exactly these rows (those not started yet run from the output: the same input), or
    stop them. Returns the jobs that still have to run."""
    spec = [j for j in s.fts.jobs if j.future is not None]
    if s.fts.spec_state == "running":
        on = set()
        for job in spec:
            on.update(job.on)
        t = time.monotonic()
        diff = [tn for tn in sorted(on) if not rows_match_image(s, tn)]
        s.tick("fts_speculation_check", t)
        if diff:
            stop_speculation(s, "final rows of %s differ from the image's" % ", ".join(diff))
        else:
            s.fts.spec_state = "used"
            for job in spec:
                if job.future.cancel():
                    job.future = None
                    job.from_image = False
            s.fts.spec_pool.shutdown(wait=False)
            s.report["fts_speculation"] = {"used": True, "tables": []}
    todo = []
    for job in list(s.fts.jobs):
        if job.future is None:
            todo.append(job)
        elif s.fts.spec_state != "used":
            new = fresh_job(s, job)      # spoiled or never started: start over
            if new is not None:
                todo.append(new)
    return todo


def fresh_job(s, job):
    """A new scratch database for a job whose speculative one cannot be used; None (and
    the table reported as left for Hermes) when none can be made."""
    s.fts.jobs.remove(job)
    try:
        os.unlink(job.path)
    except OSError:
        pass
    new, why = fts.fts_prepare(s, job.name, job.trigs)
    if new is None:
        job.future = None
        job.error = "no scratch database for the build: %s" % why
        fts.install_fts(s, job)
        return None
    s.fts.jobs.append(new)
    return new
