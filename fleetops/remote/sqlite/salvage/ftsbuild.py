"""The scratch builds of the FTS tables, run side by side: those started from the image
(speculate) are kept when their input proves to be the final rows, the others run now; each
is installed into the output (fts.install_fts) and checked there as soon as it is built.
"""
import concurrent.futures
import os
import sqlite3

from fleetops.remote.sqlite.salvage import fts, ftscheck, speculate


def build_fts(s):
    """Build every prepared FTS table in its scratch database, as many at once as there
    are cores (those built speculatively from the image are kept when their input proves
    to be the final rows); each is copied into the output with its triggers as soon as it
    is built, and checked there (fresh connection) while the others are still building."""
    todo = speculate.settle_speculation(s)
    running = [j for j in s.fts.jobs if j.future is not None]
    workers = s.args.fts_workers or fts.cpus()
    workers = max(1, min(workers, len(todo) + len(running)))

    def run(job):
        try:
            fts.run_fts_job(s, job)
        except (sqlite3.Error, OSError) as e:
            job.error = "scratch build failed: %s" % e
        return job

    def done(job, others_running):
        fts.install_fts(s, job)
        try:
            os.unlink(job.path)
        except OSError:
            pass
        if others_running and job.name in s.fts.created:
            con = sqlite3.connect(s.dest.tmp_out, isolation_level=None, timeout=600)
            try:
                ftscheck.fts_check(s, job.name, con)
            finally:
                con.close()
            s.fts.checked.add(job.name)

    s.report["fts_build"] = {"mode": "scratch", "workers": workers}
    if workers == 1 and not running:
        for job in sorted(todo, key=lambda j: -j.est_bytes):
            done(run(job), False)
        return
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
    try:
        futs = {}
        for job in sorted(todo, key=lambda j: -j.est_bytes):    # longest first
            futs[pool.submit(run, job)] = job
        for job in running:
            futs[job.future] = job
        pending = set(futs)
        while pending:
            finished, pending = concurrent.futures.wait(
                pending, return_when=concurrent.futures.FIRST_COMPLETED)
            for f in finished:
                job = futs[f]
                if job.spec_error is not None:
                    # the image could not be read through: build it from the output
                    s.notes.append("FTS table %s: speculative build from the image "
                                   "failed (%s); built from the output"
                                   % (job.name, job.spec_error))
                    new = speculate.fresh_job(s, job)
                    if new is not None:
                        nf = pool.submit(run, new)
                        futs[nf] = new
                        pending.add(nf)
                    continue
                done(job, bool(pending))
    finally:
        pool.shutdown(wait=True)
