"""hermes_repair: audit the quarantined image offline, pick the repair, build and verify a new file.

Why offline and on copies (field reports 01-02): rebuilding an index rewrites b-tree pages,
so it never happens on the live file or under a writer; the quarantined image is copied
into a work directory and only that copy is touched. The path follows the audit verdict:
healthy: nothing to do; fts_index_damage: rebuild the FTS tables on the copy, then VACUUM
INTO a fresh file (falls back to salvage if that does not come out clean); index damage,
structural corruption, unreadable: salvage every readable row into a new file. The result
is audited again (it must be healthy) and its losses are held against max_loss_rows
(default 0: nothing beyond rows on unreadable pages, which no tool can read). When it does
not pass, nothing is swapped: what was running is restarted on the original file and the
host fails with the reason.
Stdlib only, Python 3.8+; main(args) is the payload entry point.
"""
import os
import sqlite3
import time
import traceback

from fleetops.remote.host.inputs import flag, number
from fleetops.remote.hermes import audit as hermes_audit
from fleetops.remote.hermes import image_swap, retired_wal, salvage_rules, steplib
from fleetops.remote.hermes import start_writers as hermes_start_writers
from fleetops.remote.host.durable import sha256_file
from fleetops.remote.sqlite import salvage as salvage_mod
from fleetops.remote.sqlite.sql import quote_ident

PATHS = {"healthy": "none", "fts_index_damage": "fts_rebuild", "index_damage": "salvage",
         "structural_corruption": "salvage", "unreadable": "salvage"}
FTS_SHADOW = ("_data", "_idx", "_content", "_docsize", "_config")



def audit_file(db, profile):
    """The audit's verdict and figures for one file, offline (no holders, services or tooling probes)."""
    opts = hermes_audit.options({"holders": False, "services": False, "tooling": False})
    opts["_root"] = os.path.dirname(db)
    tooling = {"sqlite_version": sqlite3.sqlite_version, "fts5": True, "trigram": True, "skipped": True}
    rec = hermes_audit.audit_db({"profile": profile, "home": None, "db": db}, opts, tooling, time.time())
    return rec


def _audit_summary(rec):
    return {"verdict": rec.get("verdict"), "reasons": (rec.get("reasons") or [])[:20],
            "errors_by_object": rec.get("errors_by_object"), "errors_total": rec.get("errors_total"),
            "error": rec.get("error")}


def base_counts(db):
    """{table: count(*) NOT INDEXED} for every ordinary table (FTS tables and their shadows excluded)."""
    conn = sqlite3.connect("file:%s?mode=ro" % steplib.uri_path(db), uri=True)
    try:
        objs = conn.execute("SELECT name, sql FROM sqlite_master WHERE type='table'").fetchall()
        fts = [n for n, sql in objs if sql and "VIRTUAL TABLE" in sql.upper()]
        out = {}
        for n, _sql in objs:
            if n.startswith("sqlite_") or n in fts or any(n == f + s for f in fts for s in FTS_SHADOW):
                continue
            out[n] = conn.execute("SELECT count(*) FROM %s NOT INDEXED" % quote_ident(n)).fetchone()[0]
        return out
    finally:
        conn.close()


def copy_image(qdir, man, dest_dir):
    """Copy the quarantined image (copy/) into dest_dir, checking each sha256 against the manifest."""
    steplib.makedirs_private(dest_dir)
    for name, rec in man["files"].items():
        sha = steplib.copy_private(os.path.join(man["copy_dir"], name), os.path.join(dest_dir, name))
        if sha != rec["sha256"]:
            raise RuntimeError("quarantined %s does not match its manifest (sha256 %s != %s)"
                               % (name, sha, rec["sha256"]))
    return os.path.join(dest_dir, "state.db")


def fts_rebuild(image_db, work, out_path):
    """A fresh file with the image's schema and rows, its FTS tables re-filled by their own triggers.

    Why not FTS5 'rebuild' in place: it first deletes the old index, which means reading the
    damaged shadow pages ("database disk image is malformed"). Here the FTS tables and their
    sync triggers are created from the image's DDL before the rows go in, so every message is
    indexed exactly as Hermes indexes it, and no damaged FTS page is ever read. Rowids are kept.
    """
    d = os.path.join(work, "fts-copy")
    steplib.makedirs_private(d)
    copy = os.path.join(d, "state.db")
    standalone_copy(image_db, copy)
    notes = []
    with open(image_db, "rb") as fh:
        wal = fh.read(20)[18:20] == b"\x02\x02"
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    out = sqlite3.connect(out_path, isolation_level=None)
    try:
        out.execute("ATTACH DATABASE ? AS src", (copy,))
        for pragma in ("page_size", "auto_vacuum"):
            v = out.execute("PRAGMA src.%s" % pragma).fetchone()[0]
            out.execute("PRAGMA main.%s = %d" % (pragma, int(v)))
        objs = out.execute("SELECT type, name, tbl_name, sql FROM src.sqlite_master "
                           "WHERE sql IS NOT NULL ORDER BY rowid").fetchall()
        fts = [n for t, n, _, sql in objs if t == "table" and sql.upper().startswith("CREATE VIRTUAL TABLE")]
        shadow = set(f + sfx for f in fts for sfx in FTS_SHADOW)
        tables = [(n, sql) for t, n, _, sql in objs
                  if t == "table" and n not in fts and n not in shadow and not n.startswith("sqlite_")]
        out.execute("BEGIN")
        for _n, sql in tables:
            out.execute(sql)
        for _t, n, _, sql in objs:
            if n in fts:
                out.execute(sql)
                try:
                    src_cfg = out.execute("SELECT k, v FROM src.%s ORDER BY k" % quote_ident(n + "_config")).fetchall()
                except sqlite3.Error as exc:
                    notes.append("%s: the image's FTS settings are unreadable (%s); the DDL's kept" % (n, exc))
                    src_cfg = None
                if src_cfg is not None:
                    ddl = out.execute("SELECT k, v FROM main.%s" % quote_ident(n + "_config")).fetchall()
                    salvage_mod.put_fts_config(out, n, src_cfg, ddl)
        for t, _n, _, sql in objs:
            if t == "trigger":
                out.execute(sql)
        for n, _ in tables:
            cols = [r[1] for r in out.execute("PRAGMA src.table_xinfo(%s)" % quote_ident(n)) if r[6] in (0, 1)]
            rowid = not out.execute("SELECT 1 FROM src.sqlite_master WHERE name=? AND sql LIKE '%WITHOUT ROWID%'",
                                    (n,)).fetchone()
            collist = ", ".join(quote_ident(x) for x in cols)
            if rowid:
                out.execute("INSERT INTO main.%s(rowid, %s) SELECT rowid, %s FROM src.%s NOT INDEXED" % (
                    quote_ident(n), collist, collist, quote_ident(n)))
            else:
                out.execute("INSERT INTO main.%s(%s) SELECT %s FROM src.%s" % (quote_ident(n), collist, collist, quote_ident(n)))
        if out.execute("SELECT 1 FROM src.sqlite_master WHERE name='sqlite_sequence'").fetchone() and \
                out.execute("SELECT 1 FROM main.sqlite_master WHERE name='sqlite_sequence'").fetchone():
            out.execute("DELETE FROM main.sqlite_sequence")
            out.execute("INSERT INTO main.sqlite_sequence(name, seq) SELECT name, seq FROM src.sqlite_sequence")
        for t, _n, _, sql in objs:
            if t in ("index", "view"):
                out.execute(sql)
        for pragma in ("user_version", "application_id"):
            v = out.execute("PRAGMA src.%s" % pragma).fetchone()[0]
            out.execute("PRAGMA main.%s = %d" % (pragma, int(v)))
        out.execute("COMMIT")
        out.execute("DETACH DATABASE src")
        for n in fts:
            out.execute("INSERT INTO %s(%s, rank) VALUES('integrity-check', 1)" % (quote_ident(n), quote_ident(n)))
            notes.append("%s re-filled from messages by its triggers and integrity-checked" % n)
        if wal:      # the journal mode the image was in (never DELETE to WAL or back)
            out.execute("PRAGMA journal_mode=WAL").fetchall()
            out.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        notes.append("journal mode %s, as the image" % ("wal" if wal else "delete"))
    finally:
        out.close()
    _drop_empty_sidecars(out_path)
    os.chmod(out_path, 0o600)
    return notes


def standalone_copy(image_db, out_path):
    """out_path: the image (with its sidecars) checkpointed into one file, its journal mode kept."""
    for s in steplib.SIDECARS:
        if os.path.exists(image_db + s):
            steplib.copy_private(image_db + s, out_path + s)
    checkpoint_alone(out_path)


def checkpoint_alone(path):
    """Fold path's WAL into it and drop our own empty sidecars: the file stands alone."""
    c = sqlite3.connect(path)
    try:
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    finally:
        c.close()
    _drop_empty_sidecars(path)


def _drop_empty_sidecars(path):
    for s in ("-wal", "-shm"):
        if os.path.exists(path + s) and not (s == "-wal" and os.path.getsize(path + s)):
            os.unlink(path + s)  # our own empty sidecars: the new file stands alone


def merge_retired(loc, work, image, new_db, report):
    """Rows only a retired WAL generation holds, merged by key into new_db (retired_wal.py says why)."""
    srcs = retired_wal.sources(loc)
    if not srcs:
        return 0
    rep = retired_wal.merge(new_db, srcs, os.path.join(work, "retired"), image)
    checkpoint_alone(new_db)
    rep["summary"] = retired_wal.describe(rep)
    report["retired_wal"] = rep
    return rep["merged_total"]


def retired_brief(report):
    """What the result carries of the merge: totals and, per source, where and how many."""
    rep = report.get("retired_wal")
    if not rep:
        return None
    return {"summary": rep["summary"], "merged_total": rep["merged_total"], "merged_by_table": rep["merged_by_table"],
            "conflicts_total": rep["conflicts_total"],
            "sources": [{k: x.get(k) for k in ("origin", "dir", "merged", "error")} for x in rep["sources"]]}


def _fail(loc, args, msg, report, restart=True):
    """No swap: restart what was running on the original file, fail the host with the reason."""
    out = {"changed": False, "failed": True, "skipped": False, "swap": False, "msg": msg, "report": report}
    if restart and flag(args.get("restart_on_refusal", True)):
        st = hermes_start_writers.start(loc, args)
        out["restart"] = st
        out["msg"] = "%s; not swapped; restarted what was running on the original file: %s" % (msg, st["msg"])
    return out


def repair(loc, args):
    started = time.time()
    max_loss = int(number(args.get("max_loss_rows"), 0, int))
    qdir = args.get("quarantine_dir") or image_swap.latest_quarantine(loc)
    if not qdir:
        return {"changed": False, "failed": True, "skipped": False,
                "msg": "no quarantine for profile %s: run hermes_quarantine first" % loc["profile"]}
    man = image_swap.load_manifest(qdir)
    leftovers = steplib.set_aside_incomplete(os.path.join(loc["fleetops"], "work"), "repair-report.json")
    work = os.path.join(loc["fleetops"], "work", os.path.basename(qdir))
    if os.path.exists(work):
        work = "%s.%s" % (work, steplib.utc_ts())
    steplib.makedirs_private(work)
    report = {"kind": "fleetops-repair", "version": 1, "profile": loc["profile"], "db": loc["db"],
              "quarantine_dir": qdir, "work_dir": work, "started_at": steplib.iso(), "max_loss_rows": max_loss,
              "source_files": man["files"], "leftovers": leftovers}
    image = copy_image(qdir, man, os.path.join(work, "image"))
    arec = audit_file(image, loc["profile"])
    report["audit"] = _audit_summary(arec)
    verdict = arec.get("verdict")
    path = PATHS.get(verdict)
    report["verdict"] = verdict
    report["path"] = path
    if path is None:
        report["result"] = "failed"
        return _fail(loc, args, "the quarantined image's verdict is %s: no repair path" % verdict, report)
    out_dir = os.path.join(work, "new")
    steplib.makedirs_private(out_dir)
    new_db = os.path.join(out_dir, "state.db")
    if path == "none" and retired_wal.sources(loc):
        standalone_copy(image, new_db)
        if merge_retired(loc, work, image, new_db, report):
            path = report["path"] = "retired_wal_merge"
        else:
            for s in steplib.SIDECARS:
                if os.path.exists(new_db + s):
                    os.rename(new_db + s, os.path.join(work, "nothing-merged.db" + s))
    if path == "none":
        report["result"] = "nothing_to_do"
        report["expect_counts"] = base_counts(image)
        _save_report(loc, work, report)
        return {"changed": False, "failed": False, "skipped": False, "swap": False, "path": "none",
                "verdict": verdict, "new_db": None, "expect_counts": report["expect_counts"],
                "report": report, "msg": "%s is healthy: nothing to repair (no swap)%s" % (
                    loc["db"], "; " + report["retired_wal"]["summary"] if report.get("retired_wal") else "")}
    loss = 0
    if path == "fts_rebuild":
        try:
            before = base_counts(image)
            report["fts_rebuild"] = fts_rebuild(image, work, new_db)
            after = base_counts(new_db)
            if after != before:
                raise RuntimeError("table counts changed by the FTS rebuild: %r -> %r" % (before, after))
            report["identified_counts"] = before
            chk = audit_file(new_db, loc["profile"])
            if chk.get("verdict") != "healthy":
                raise RuntimeError("rebuilt file is %s: %s" % (chk.get("verdict"), (chk.get("reasons") or [])[:3]))
        except (sqlite3.Error, RuntimeError, OSError) as exc:
            report["fts_rebuild_failed"] = "%s: %s" % (type(exc).__name__, exc)
            path = report["path"] = "salvage"
            for s in steplib.SIDECARS:
                if os.path.exists(new_db + s):
                    os.rename(new_db + s, os.path.join(work, "fts-rebuild-rejected.db" + s))
    if path == "salvage":
        fts_mode = args.get("fts") or "rebuild"
        try:
            rep = salvage_mod.salvage(image, new_db, fts=fts_mode, schema_from=args.get("schema_from"),
                                      report_path=os.path.join(work, "salvage-report.json"),
                                      rules=salvage_rules.RULES)
        except Exception as exc:  # noqa: BLE001 - becomes the host's failure reason
            report["result"] = "failed"
            report["salvage_error"] = "%s: %s" % (type(exc).__name__, exc)
            report["traceback"] = traceback.format_exc()[-3000:]
            _save_report(loc, work, report)
            return _fail(loc, args, "salvage of %s failed: %s" % (image, report["salvage_error"]), report)
        report["salvage"] = dict((k, rep.get(k)) for k in (
            "verdict", "verdict_reasons", "loss_rows", "lost_known_from_indexes", "identified_rows",
            "saved_rows", "quarantined_total", "quarantine_file", "verification", "output_sha256",
            "output_size"))
        report["salvage"]["tables"] = dict((t, dict((k, v.get(k)) for k in (
            "identified", "saved", "duplicates_dropped", "repaired", "quarantined", "loss_rows",
            "lost_known_from_indexes", "verdict", "unreadable_pages")))
            for t, v in (rep.get("tables") or {}).items())
        # held against max_loss_rows: the rows salvage read and did not save; rows on
        # unreadable pages (those the indexes name, in salvage's loss_rows) are reported
        gone = int(rep.get("lost_known_from_indexes") or 0)
        report["lost_on_unreadable_pages"] = gone
        loss = int(rep.get("loss_rows") or 0) - gone
        if rep.get("verdict") == "failed" or not os.path.exists(new_db):
            report["result"] = "failed"
            _save_report(loc, work, report)
            return _fail(loc, args, "salvage output failed its own verification: %s" % (
                "; ".join(rep.get("verdict_reasons") or []) or "see report"), report)
    if path in ("salvage", "fts_rebuild"):
        merge_retired(loc, work, image, new_db, report)
    chk = audit_file(new_db, loc["profile"])
    report["output_audit"] = _audit_summary(chk)
    report["loss_rows"] = loss
    report["new_db"] = new_db
    report["new_sha256"] = sha256_file(new_db)
    report["expect_counts"] = base_counts(new_db)
    report["elapsed_s"] = round(time.time() - started, 3)
    if chk.get("verdict") != "healthy":
        report["result"] = "failed"
        _save_report(loc, work, report)
        return _fail(loc, args, "the repaired file is not healthy (%s: %s)" % (
            chk.get("verdict"), "; ".join((chk.get("reasons") or [])[:3])), report)
    if loss > max_loss:
        report["result"] = "refused_loss"
        _save_report(loc, work, report)
        return _fail(loc, args, "the repair would lose %d row(s), more than max_loss_rows=%d (%s)" % (
            loss, max_loss, ", ".join(
                "%s %d" % (t, v["loss_rows"] - (v.get("lost_known_from_indexes") or 0))
                for t, v in sorted(report["salvage"]["tables"].items())
                if v.get("loss_rows") != (v.get("lost_known_from_indexes") or 0))), report)
    report["result"] = "ready"
    _save_report(loc, work, report)
    sv = report.get("salvage") or {}
    return {"changed": True, "failed": False, "skipped": False, "swap": True, "path": path, "verdict": verdict,
            "new_db": new_db, "new_sha256": report["new_sha256"], "expect_counts": report["expect_counts"],
            "loss_rows": loss, "report": report, "report_path": os.path.join(work, "repair-report.json"),
            "leftovers": report["leftovers"],
            "retired_wal": retired_brief(report),
            "msg": "%s was %s; %s built %s (healthy%s), ready to swap%s%s" % (
                loc["db"], verdict, path, new_db,
                ", salvage %s: %s of %s rows" % (sv.get("verdict"), sv.get("saved_rows"), sv.get("identified_rows"))
                if sv else "", "".join("; " + n for n in report["leftovers"]),
                "; " + report["retired_wal"]["summary"] if report.get("retired_wal") else "")}


def _save_report(loc, work, report):
    steplib.write_json(os.path.join(work, "repair-report.json"), report)
    steplib.makedirs_private(os.path.join(loc["fleetops"], "state"))
    steplib.write_json(os.path.join(loc["fleetops"], "state", "%s-repair.json" % loc["profile"]), report)


def main(args):
    """Payload: {hermes_home?, profile?, quarantine_dir?, max_loss_rows?, fts?, schema_from?,
    restart_on_refusal?, run_id?, _check?}."""
    args = args or {}
    loc, bad = steplib.located(args)
    if bad:
        return bad
    if flag(args.get("_check")):
        if not os.path.exists(loc["db"]):
            return {"changed": False, "failed": True, "skipped": False, "msg": "no state.db at %s" % loc["db"]}
        rec = hermes_audit.audit_db({"profile": loc["profile"], "home": None, "db": loc["db"]},
                                    dict(hermes_audit.options({"holders": False, "services": False,
                                                               "tooling": False}), _root=loc["root"]),
                                    {"sqlite_version": sqlite3.sqlite_version, "fts5": True, "trigram": True},
                                    time.time())
        path = PATHS.get(rec.get("verdict"))
        kept = retired_wal.sources(loc)
        return {"changed": False, "failed": False, "skipped": False, "verdict": rec.get("verdict"), "path": path,
                "retired_wal_sources": len(kept),
                "msg": "check mode: %s is %s now; the repair would take path %s on its quarantined image%s" % (
                    loc["db"], rec.get("verdict"), path, "" if not kept else
                    ", then merge the rows it lacks from %d retired WAL capture(s)" % len(kept))}
    if image_swap.pending(loc):
        return {"changed": False, "failed": True, "skipped": False, "refused": True,
                "msg": "an interrupted swap is pending: run hermes_swap (action recover) first"}
    lk, refused = steplib.lock_or_refusal(loc, args, "hermes_repair")
    if refused:
        return refused
    steplib.exit_with_connection()
    try:
        return repair(loc, args)
    except Exception as exc:  # noqa: BLE001 - a payload answers
        return _fail(loc, args, "repair failed: %s: %s" % (type(exc).__name__, exc),
                     {"traceback": traceback.format_exc()[-3000:]})
    finally:
        lk.release()
