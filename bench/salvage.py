#!/usr/bin/env python3
"""Salvage benchmark: `fleetops salvage` beside SQLite's `.recover` replayed into a fresh db.

The big realistic corpus file (tests/corpus/build.py BIG: ~280 MB, 400 sessions, ~27,000
messages made with the real Hermes SessionDB; --quick: the 40-session STANDARD file) is
damaged one way per case with the corpus damage functions, on a copy. On each damaged image:

- fleetops: `python -m fleetops salvage SRC OUT --json` (fts=rebuild, the default), and
  `--fts leave-to-hermes` (FTS left for Hermes to rebuild on its next open);
- .recover: `sqlite3 SRC .recover | sqlite3 FRESH` on its own copy of the image, with the
  shell bench/_recover.py finds (or the column is skipped with the reason).

Each output is counted with NOT INDEXED table scans and compared row by row with the case's
ground truth (tests/corpus/damage.py): rows recovered of those expected, rows whose content
differs from the truth or that should not exist at all (dup/wrong), deleted rows brought
back from the freelist (resurrected), expected rows missing (lost). `.recover` puts rows it
cannot attribute into lost_and_found: counted apart, never as recovered. Times are wall
seconds (and CPU seconds of the child processes) measured side by side in the same run;
the ratio is fleetops / .recover. Prints figures; never asserts.

    python3 bench/salvage.py [--quick] [--cases a,b,...|all|unseen] [--no-leave] [--keep] [--work DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT  # noqa: E402
from _recover import find_recover  # noqa: E402

sys.path.insert(0, ROOT)

DEFAULT_CASES = ["fts_pages_overwritten", "session_duplicated_behind_title_index",
                 "garbage_huge_rowid", "not_null_nulled", "interior_page_zeroed",
                 "garbage_leaf_pages", "page_referenced_twice", "deleted_on_freelist", "torn_wal"]
# every corpus case that has rows to bring back
# damage it had never seen: evidence of free pages destroyed (deleted sessions on free pages),
# a foreign leaf, a lost schema page, bad bytes, header fields, overflow chains, stale WAL frames
UNSEEN_CASES = ["freelist_trunk_pointer_damaged", "freelist_trunk_page_damaged", "truncated_copy",
                "header_zeroed", "interior_points_at_foreign_leaf", "schema_page_lost",
                "invalid_utf8_in_rows", "header_magic_damaged", "header_page_size_damaged",
                "header_freelist_damaged", "header_zeroed_alone", "overflow_chains_damaged",
                "wal_stale_frames"]
ROW_CASES = DEFAULT_CASES[:] + ["healthy", "unique_index_emptied", "schema_page_damaged",
                                "page1_damaged"] + UNSEEN_CASES
TABLES = ("sessions", "messages")


# ---------------------------------------------------------------- running

def run_timed(cmd, env=None, cwd=None):
    """(wall s, child CPU s, returncode, stdout, stderr) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.returncode, p.stdout, p.stderr


def run_fleetops(src, out, fts, schema_from=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "fleetops", "salvage", src, out, "--json", "--fts", fts]
    if schema_from:
        cmd += ["--schema-from", schema_from]
    wall, cpu, rc, so, se = run_timed(cmd, env=env, cwd=ROOT)
    try:
        rep = json.loads(so)
    except ValueError:
        rep = {"verdict": "error", "error": (se.strip().splitlines() or ["no output"])[-1][:200]}
    return wall, cpu, rc, rep


def run_recover(tool, src, out):
    """`shell src .recover | shell out`; returns (wall, cpu, rc, first stderr line)."""
    script = '"$0" "$1" .recover | "$0" "$2"; echo "${PIPESTATUS[0]} ${PIPESTATUS[1]}" >&2'
    wall, cpu, rc, _so, se = run_timed(["bash", "-c", script, tool.shell, src, out], env=tool.environ())
    lines = se.strip().splitlines()
    status = lines[-1] if lines else "?"
    errs = [ln for ln in lines[:-1] if ln.strip()]
    return wall, cpu, status, errs


# ---------------------------------------------------------------- judging

def _text(b):
    """Text as the bytes it is where it is not valid UTF-8 (damaged rows are kept so)."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return ("invalid-utf8", bytes(b))


def out_rows(path, table):
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    con.text_factory = _text
    try:
        return dict((r[0], tuple(r[1:])) for r in con.execute(
            'SELECT rowid, * FROM "%s" NOT INDEXED' % table))
    finally:
        con.close()


def lost_and_found(path, d, gt):
    """(rows, deleted rows) in .recover's lost_and_found table(s): rows it could not attribute.

    A row there counts as deleted data when its record has the column count of sessions or
    messages and its rowid is one of that table's ground-truth deleted_on_freelist rows.
    """
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        names = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_schema WHERE type='table' AND name LIKE 'lost_and_found%'")]
        total = deleted = 0
        for n in names:
            total += con.execute('SELECT count(*) FROM "%s" NOT INDEXED' % n).fetchone()[0]
            for t in TABLES:
                dl = d.deleted_on_freelist.get(t) or set()
                if not dl:
                    continue
                ncols = len(gt["tables"][t]["columns"])
                ids = {r[0] for r in con.execute('SELECT id FROM "%s" NOT INDEXED WHERE nfield = ?' % n, (ncols,))}
                deleted += len(ids & dl)
        return total, deleted
    finally:
        con.close()


def quick_check(path):
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        r = [x[0] for x in con.execute("PRAGMA quick_check(5)")]
        return "ok" if r == ["ok"] else "ERR: " + r[0][:60]
    except sqlite3.Error as e:
        return "ERR: %s" % e
    finally:
        con.close()


def fts_check(path):
    """FTS5 'integrity-check' of every FTS5 table in an output (rolled back): 'ok', 'BAD n/m' or 'none'."""
    if not os.path.exists(path):
        return "-"
    con = sqlite3.connect(path)
    try:
        names = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_schema WHERE type='table' AND sql LIKE 'CREATE VIRTUAL TABLE%fts5%'")]
        bad = 0
        for n in names:
            try:
                con.execute('INSERT INTO "%s"("%s") VALUES(\'integrity-check\')' % (n, n))
            except sqlite3.Error:
                bad += 1
        con.rollback()
        return "none" if not names else ("ok" if not bad else "BAD %d/%d" % (bad, len(names)))
    finally:
        con.close()


def judge(path, d, gt):
    """Per table: got, expected, good, wrong (content differs), extra, resurrected, lost."""
    nulled = dict(((t, rid), col) for t, rid, col, _ in d.nulled)
    res = {}
    for t in TABLES:
        expected = d.expected_rows.get(t, set())
        deleted = d.deleted_on_freelist.get(t, set())
        x = dict(got=0, expected=len(expected), good=0, wrong=0, extra=0, resurrected=0,
                 lost=len(expected), error=None)
        res[t] = x
        try:
            got = out_rows(path, t)
        except sqlite3.Error as e:
            x["error"] = str(e)
            continue
        cols = gt["tables"][t]["columns"]
        truth_rows = gt["tables"][t]["rows"]
        x["got"] = len(got)
        for rid, vals in got.items():
            if rid in deleted:
                x["resurrected"] += 1
                continue
            if rid not in expected:
                x["extra"] += 1
                continue
            src_rid = rid
            if d.rewritten_rowid and d.rewritten_rowid[0] == t and rid == d.rewritten_rowid[2]:
                src_rid = d.rewritten_rowid[1]
            want = list(truth_rows[src_rid])
            if t == "messages" and cols[0] == "id":
                want[0] = rid
            if (t, rid) in nulled:  # the nulled column may come back NULL or repaired
                i = cols.index(nulled[(t, rid)])
                want[i] = vals[i]
            for tt, r2, col, stored in d.extra.get("altered", []):   # damaged bytes, as stored
                if (tt, r2) == (t, rid):
                    want[cols.index(col)] = _text(stored) if isinstance(stored, bytes) else stored
            if list(vals) == want:
                x["good"] += 1
            else:
                x["wrong"] += 1
        x["lost"] = len(expected - set(got))
    return res


# ---------------------------------------------------------------- output

def fmt_pair(res, key):
    return "%d/%d" % (res["sessions"][key], res["messages"][key])


def row_cells(case, tool, res, secs, cpu, extra):
    s, m = res["sessions"], res["messages"]
    return [case, tool, "%d/%d" % (s["good"], s["expected"]), "%d/%d" % (m["good"], m["expected"]),
            "%d/%d" % (s["wrong"] + s["extra"], m["wrong"] + m["extra"]),
            fmt_pair(res, "resurrected"), fmt_pair(res, "lost")] + extra + [
            "%.1f" % secs, "%.1f" % cpu]


def print_table(headers, rows):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(h)
              for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    print(line(headers))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(line(r))


# ---------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the 40-session STANDARD db instead of the big one")
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES),
                    help="comma-separated corpus damage cases, or 'all' (default: %(default)s)")
    ap.add_argument("--no-leave", action="store_true", help="skip the --fts leave-to-hermes run")
    ap.add_argument("--no-recover", action="store_true", help="skip the .recover column")
    ap.add_argument("--keep", action="store_true", help="keep the damaged images and outputs")
    ap.add_argument("--work", default="/var/tmp/fleetops-bench-salvage")
    opts = ap.parse_args()
    cases = (ROW_CASES if opts.cases == "all" else UNSEEN_CASES if opts.cases == "unseen"
             else [c.strip() for c in opts.cases.split(",") if c.strip()])

    from tests.corpus import build, damage, truth
    unknown = [c for c in cases if c not in damage.ALL_CASES]
    if unknown:
        ap.error("unknown cases: %s (known: %s)" % (", ".join(unknown), ", ".join(damage.ALL_CASES)))

    t_start = time.monotonic()
    tool = None
    if opts.no_recover:
        print(".recover: skipped (--no-recover)")
    else:
        tool = find_recover()
        for why in tool.tried:
            print(".recover candidate rejected: %s" % why)
        if tool.available:
            print(".recover: %s" % tool.description)
        else:
            print(".recover: none available; that column is skipped")
            tool = None

    os.makedirs(opts.work, exist_ok=True)
    base = os.path.join(opts.work, "base", "state.db")
    if opts.quick:
        meta = build.realistic_db(base, **build.STANDARD)
        label = "STANDARD (40 sessions)"
    else:
        meta = build.realistic_db(base, big=True)
        label = "BIG (400 sessions)"
    gt_base = truth.ground_truth(base)
    print("database: %s, %.0f MB, %d sessions, %d messages, Hermes %s; %s salvage rows compared "
          "with ground truth; CPU seconds are of the child processes" % (
              label, os.path.getsize(base) / 1e6, gt_base["tables"]["sessions"]["count"],
              gt_base["tables"]["messages"]["count"], meta.get("hermes_version"), len(cases)))
    print("python %s, sqlite3 module %s; machine: %d CPUs, load %.1f" % (
        sys.version.split()[0], sqlite3.sqlite_version, os.cpu_count() or 0, os.getloadavg()[0]))
    print()

    gts = {os.path.abspath(base): gt_base}
    rows, summary, notes = [], [], []
    for case in cases:
        cdir = os.path.join(opts.work, case)
        shutil.rmtree(cdir, ignore_errors=True)
        os.makedirs(cdir)
        t0 = time.monotonic()
        d = damage.make(case, base, os.path.join(cdir, "damaged", "state.db"))
        tp = os.path.abspath(d.truth_path)
        if tp not in gts:
            gts[tp] = truth.ground_truth(tp)
        gt = gts[tp]
        print("[%s] %s (damage %.0fs)" % (case, d.description, time.monotonic() - t0), flush=True)

        # fleetops, fts=rebuild (the default)
        fo_out = os.path.join(cdir, "fleetops", "state.db")
        os.makedirs(os.path.dirname(fo_out))
        fo_wall, fo_cpu, _rc, rep = run_fleetops(d.path, fo_out, "rebuild", d.schema_from)
        fo = judge(fo_out, d, gt) if os.path.exists(fo_out) else None
        if fo is None:
            notes.append("%s: fleetops wrote no output: %s" % (case, rep.get("error") or rep.get("verdict")))
            fo = judge(os.path.join(cdir, "nonexistent.db"), d, gt)
        fo_q = quick_check(fo_out) if os.path.exists(fo_out) else "-"
        rows.append(row_cells(case, "fleetops", fo, fo_wall, fo_cpu,
                              ["-", rep.get("verdict", "?"), fo_q, fts_check(fo_out)]))
        for n in rep.get("notes", []) or []:
            notes.append("%s: fleetops note: %s" % (case, n))
        print("  fleetops rebuild  %.1fs (cpu %.1fs) verdict %s; phases %s" % (
            fo_wall, fo_cpu, rep.get("verdict"), rep.get("durations_s")), flush=True)

        lh_wall = None
        if not opts.no_leave:
            lh_out = os.path.join(cdir, "leave", "state.db")
            os.makedirs(os.path.dirname(lh_out))
            lh_wall, lh_cpu, _rc, lrep = run_fleetops(d.path, lh_out, "leave-to-hermes", d.schema_from)
            lh = judge(lh_out, d, gt) if os.path.exists(lh_out) else judge(os.path.join(cdir, "none.db"), d, gt)
            rows.append(row_cells(case, "fleetops leave-to-hermes", lh, lh_wall, lh_cpu,
                                  ["-", lrep.get("verdict", "?"),
                                   quick_check(lh_out) if os.path.exists(lh_out) else "-",
                                   fts_check(lh_out)]))
            print("  fleetops leave    %.1fs (cpu %.1fs) verdict %s" % (lh_wall, lh_cpu, lrep.get("verdict")),
                  flush=True)
            if os.path.exists(lh_out) and not opts.keep:
                shutil.rmtree(os.path.dirname(lh_out), ignore_errors=True)

        rc_wall = rc_cpu = rc = None
        if tool:
            rsrc = os.path.join(cdir, "recover-src", "state.db")
            build.copy_image(Path(d.path), Path(rsrc))  # .recover opens read-write: its own copy
            rc_out = os.path.join(cdir, "recover", "state.db")
            os.makedirs(os.path.dirname(rc_out))
            rc_wall, rc_cpu, status, errs = run_recover(tool, rsrc, rc_out)
            rc = judge(rc_out, d, gt)
            laf, laf_del = lost_and_found(rc_out, d, gt)
            rows.append(row_cells(case, ".recover", rc, rc_wall, rc_cpu,
                                  ["%d (%d deleted)" % (laf, laf_del), "exit %s" % status.replace(" ", "|"), quick_check(rc_out),
                                   fts_check(rc_out)]))
            if errs:
                notes.append("%s: .recover stderr (%d lines): %s" % (case, len(errs), errs[0][:160]))
            print("  .recover          %.1fs (cpu %.1fs) pipe exit %s, lost_and_found %d" % (
                rc_wall, rc_cpu, status, laf), flush=True)
            shutil.rmtree(os.path.dirname(rsrc), ignore_errors=True)

        # target of issue 4, per case
        def good(r):
            return r["sessions"]["good"], r["messages"]["good"]
        bad_fo = sum(fo[t]["wrong"] + fo[t]["extra"] + fo[t]["resurrected"] for t in TABLES)
        if rc:
            ge = all(a >= b for a, b in zip(good(fo), good(rc)))
            ratio = fo_wall / rc_wall if rc_wall else float("inf")
            met = ge and bad_fo == 0 and ratio <= 2.0
            summary.append([case, "%.1f" % fo_wall, "%.1f" % lh_wall if lh_wall is not None else "-",
                            "%.1f" % rc_wall, "%.2fx" % ratio,
                            "%.2fx" % (fo_cpu / rc_cpu) if rc_cpu else "-",
                            "%.2fx" % (lh_wall / rc_wall) if lh_wall is not None else "-",
                            "%+d/%+d" % tuple(a - b for a, b in zip(good(fo), good(rc))),
                            "yes" if ge else "NO", "yes" if bad_fo == 0 else "NO (%d)" % bad_fo,
                            "yes" if ratio <= 2.0 else "NO", "MET" if met else "not met"])
        else:
            summary.append([case, "%.1f" % fo_wall, "%.1f" % lh_wall if lh_wall is not None else "-",
                            "-", "-", "-", "-", "-", "-", "yes" if bad_fo == 0 else "NO (%d)" % bad_fo, "-", "-"])
        if not opts.keep:
            shutil.rmtree(cdir, ignore_errors=True)

    print()
    print("Rows: good/expected (good = expected rowid, content equal to ground truth). "
          "dup/wrong: rows whose content differs from the truth or that should not exist; "
          "resurrected: deleted rows from the freelist; lost: expected rows missing "
          "(each sessions/messages). l&f: rows .recover left in its lost_and_found table, of "
          "which deleted rows from the freelist. fts check: FTS5 'integrity-check' of the output's "
          "FTS tables (none: left for Hermes to rebuild).")
    print_table(["case", "tool", "sessions", "messages", "dup/wrong", "resurrected", "lost",
                 "l&f", "verdict/exit", "quick_check", "fts check", "seconds", "cpu s"], rows)
    print()
    print("Times side by side (wall seconds; ratio = fleetops / .recover, wall and child CPU "
          "seconds; the machine is shared, so CPU is the steadier figure). Target (issue 4): rows >= "
          ".recover's, no resurrected or dup/wrong rows, time <= 2x .recover (fts=rebuild).")
    print_table(["case", "fleetops", "leave-to-hermes", ".recover", "ratio", "cpu ratio", "leave ratio",
                 "good rows vs .recover (s/m)", "rows >=", "no resurrected/dup", "<= 2x", "target"], summary)
    if notes:
        print()
        for n in notes:
            print("note: %s" % n)
    if tool:
        print()
        print(".recover: %s" % tool.description)
    print("total bench time: %.0fs" % (time.monotonic() - t_start))
    if not opts.keep:
        shutil.rmtree(os.path.dirname(base), ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
