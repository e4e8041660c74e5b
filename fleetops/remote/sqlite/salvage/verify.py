"""The checks of the finished output (quick_check, counts by table scan, FTS answers, the
schema against the source's), the rename into place and the report.
"""
import json
import os
import sqlite3
import threading

from fleetops.remote.host.durable import fsync_dir, fsync_file, sha256_file
from fleetops.remote.sqlite.salvage import fts, scan
from fleetops.remote.sqlite.salvage.ftscheck import fts_check, fts_config_check
from fleetops.remote.sqlite.salvage.model import load_schema_rows
from fleetops.remote.sqlite.salvage.sqlutil import jsonable, one_row
from fleetops.remote.sqlite.sql import quote_ident


def verify_and_finish(s):
    # a fresh connection (below): verification sees only what is on disk
    s.dest.out.close()
    # the output was written without syncs: start writing it back now, while it is
    # verified, so the durable commit at the end (journal mode WAL) has little left to do
    flush = threading.Thread(target=fts.fdatasync_path, args=(s.dest.tmp_out,))
    flush.daemon = True
    flush.start()
    out = s.dest.reopen()
    # the FTS checks (an FTS5 integrity-check takes the write lock, so one at a time, on
    # their own fresh connection) run beside the read-only checks below
    todo = [n for n in s.fts.created if n not in s.fts.checked]
    fts_results = {}

    def fts_checks():
        con = sqlite3.connect(s.dest.tmp_out, isolation_level=None, timeout=600,
                              check_same_thread=False)
        try:
            for n in todo:
                fts_results[n] = fts_check(s, n, con)
        except sqlite3.Error as e:
            fts_results["error"] = str(e)
        finally:
            con.close()

    checker = threading.Thread(target=fts_checks)
    checker.start()
    ver = {}
    try:
        ic = [r[0] for r in out.execute("PRAGMA integrity_check")]
        ver["integrity_check"] = ic if ic != ["ok"] else "ok"
        fk = out.execute("PRAGMA foreign_key_check").fetchall()
        ver["foreign_key_check"] = [list(r) for r in fk]
        counts_ok = True
        tables_rep = {}
        for name, st in s.schema.states.items():
            saved = one_row(out, "SELECT count(*) FROM %s NOT INDEXED" % quote_ident(name))[0]
            via = one_row(out, "SELECT count(*) FROM %s" % quote_ident(name))[0]
            if saved != via:
                counts_ok = False
            tables_rep[name] = table_report(s, st, saved, via)
        ver["counts_match"] = counts_ok
        ver["schema_objects"] = schema_check(s, out)
    finally:
        checker.join()
    fts_ok = "error" not in fts_results
    if not fts_ok:
        s.notes.append("FTS checks failed: %s" % fts_results["error"])
    for name in s.fts.created:
        rep = s.fts.report[name]
        fts_ok = (rep.get("integrity_check") == "ok" and rep.get("match_ok") is True
                  and fts_ok)
        fts_ok = fts_config_check(s, name) and fts_ok
    # fts=rebuild promises every FTS table rebuilt: one left out (a tokenizer this SQLite
    # lacks, a failed build) fails the salvage; leaving them to Hermes is the operator's
    # choice (fts=leave-to-hermes), never a fallback reported as fine
    fts_missing = [] if s.args.fts != "rebuild" else [
        "FTS table %s not rebuilt (%s); salvage with fts=leave-to-hermes to leave the FTS "
        "tables to Hermes" % (n, rep.get("reason") or "not created")
        for n, rep in sorted(s.fts.report.items()) if not rep.get("created")]
    ver["fts_not_rebuilt"] = fts_missing
    ver["fts_ok"] = fts_ok = fts_ok and not fts_missing
    schema_ok = ver["schema_objects"]["ok"]
    ver["ok"] = (ver["integrity_check"] == "ok" and not fk and counts_ok and fts_ok
                 and schema_ok)
    r = s.report
    r["verification"] = ver
    r["tables"] = tables_rep
    r["fts"] = s.fts.report
    r["quarantined_total"] = s.quarantine.q_count
    r["loss_rows"] = sum(x["loss_rows"] for x in tables_rep.values())
    r["lost_known_from_indexes"] = sum(x["lost_known_from_indexes"] for x in tables_rep.values())
    r["identified_rows"] = sum(x["identified"] for x in tables_rep.values())
    r["saved_rows"] = sum(x["saved"] for x in tables_rep.values())
    partial = [n for n, x in tables_rep.items() if x["verdict"] != "complete"]
    lost_somewhere = s.scan.unattributed and any(scan.tree_holes(s, st) for st in s.schema.states.values())
    sw = s.scan.classes["walks"].get("sqlite_schema")
    ddl_lost = (sw is not None and bool(sw.bad_pages or sw.bad_cells) and not s.args.schema_from
                and not s.report.get("schema_fallback", {}).get("used"))
    if not lost_somewhere and s.scan.unattributed:
        s.notes.append("%d unreadable pages belong to no tree, and every table's tree is "
                       "whole: they held no live rows" % len(s.scan.unattributed))
    if not ver["ok"]:
        r["verdict"] = "failed"
    elif partial or lost_somewhere or ddl_lost:
        r["verdict"] = "partial"
    else:
        r["verdict"] = "complete"
    schema_problems = [] if schema_ok else ["schema objects of the source not in the output "
                                            "as they were: %s" % ver["schema_objects"]]
    r["verdict_reasons"] = (["verification failed"] if not ver["ok"] else []) + fts_missing + \
        schema_problems + [
        "table %s is partial" % n for n in partial] + (
        ["%d unreadable pages could not be attributed to a table" % len(s.scan.unattributed)]
        if lost_somewhere else []) + (
        ["sqlite_schema lost pages and no schema gives their objects' DDL: tables whose "
         "DDL was there are not salvaged"] if ddl_lost else [])
    # the journal mode the source was in (never DELETE to WAL or back: Hermes picked it
    # for this host's SQLite and filesystem), a WAL output checkpointed into one file (own
    # connection: no open statements); the switch commits with synchronous=FULL
    out.close()
    flush.join()
    out = sqlite3.connect(s.dest.tmp_out, isolation_level=None)
    if s.image.keep["journal_mode"] == "wal":
        mode = out.execute("PRAGMA journal_mode=WAL").fetchall()
        ck = out.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    else:
        out.execute("PRAGMA synchronous=FULL")
        mode = out.execute("PRAGMA journal_mode").fetchall()
        ck = None
    r["output_format"] = _output_format(out, mode)
    out.close()
    r["output_journal_mode"] = r["output_format"]["journal_mode"]
    kept = dict((k, (s.image.keep[k], v)) for k, v in r["output_format"].items()
                if s.image.keep.get(k) != v)
    if kept:
        r["verdict"] = "failed"
        r["verdict_reasons"].append("output differs from the source in %s" % ", ".join(
            "%s (%r, source %r)" % (k, b, a) for k, (a, b) in sorted(kept.items())))
    if ck and ck[0][0]:
        s.notes.append("output checkpoint was blocked: %r" % (ck,))
    os.chmod(s.dest.tmp_out, 0o600)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(s.dest.tmp_out + suffix):
            if os.path.getsize(s.dest.tmp_out + suffix) and suffix == "-wal":
                s.notes.append("output WAL not empty after checkpoint")
            else:
                os.unlink(s.dest.tmp_out + suffix)
    fsync_file(s.dest.tmp_out)
    os.rename(s.dest.tmp_out, s.args.output)
    fsync_dir(os.path.dirname(os.path.abspath(s.args.output)))
    r["output_sha256"] = sha256_file(s.args.output)
    r["output_size"] = os.path.getsize(s.args.output)


def schema_check(s, out):
    """Every schema object the source had (tables, views, indexes, triggers, FTS tables and
    their shadow tables) is in the output with the source's SQL (a shadow table by name: its
    DDL is this SQLite's); left out are only the FTS tables not rebuilt, with their shadow
    tables and triggers, reported on their own."""
    gone = set(n for n, rep in s.fts.report.items() if not rep.get("created"))
    skip = set(gone)
    for name, trigs in fts.fts_triggers(s).items():
        if name in gone:
            skip.update(r["name"] for r in trigs)
    for t in s.schema.tables.values():
        if t.shadow_of in gone:
            skip.add(t.name)

    def objects(rows):
        return dict(((r["type"], r["name"]), r["sql"]) for r in rows
                    if r["sql"] and not r["name"].lower().startswith("sqlite_")
                    and r["name"] not in skip)

    want = objects(s.schema.schema_rows)
    got = objects(load_schema_rows(out))
    shadow = set(t.name for t in s.schema.tables.values() if t.shadow_of)
    # DDL a fallback schema supplied for objects lost with the schema page was not read
    # from the file: one that could not be created is noted (the notes say why), not
    # counted as an object of the source the output lost
    guessed = set((s.report.get("schema_fallback") or {}).get("objects") or [])
    not_created = sorted("%s %s" % k for k in set(want) - set(got) if k[1] in guessed)
    want = dict((k, v) for k, v in want.items() if not (k[1] in guessed and k not in got))
    missing = sorted("%s %s" % k for k in set(want) - set(got))
    changed = sorted("%s %s" % k for k in set(want) & set(got)
                     if k[1] not in shadow and want[k] != got[k])
    extra = sorted("%s %s" % k for k in set(got) - set(want))
    return {"ok": not (missing or changed or extra), "objects": len(want),
            "missing": missing, "sql_differs": changed, "extra": extra,
            "fallback_ddl_not_created": not_created}


def table_report(s, st, saved, via_index):
    identified = st.identified + st.undecodable
    loss = identified - saved - st.duplicates + len(st.lost_by_index)
    accounted = identified == saved + st.duplicates + st.quarantined
    unreadable = dict((str(k), v) for k, v in st.bad_pages.items())
    reasons = []
    if loss - len(st.lost_by_index):
        reasons.append("%d identified rows not saved" % (loss - len(st.lost_by_index)))
    if st.lost_by_index:
        reasons.append("%d rows its indexes hold that no page gave back" % len(st.lost_by_index))
    if st.index_held:
        reasons.append("%d rows held back: in none of its indexes (deleted or superseded rows "
                       "on a stale page)" % len(st.index_held))
    if unreadable:
        reasons.append("%d unreadable pages in its tree" % len(unreadable))
    if st.bad_cells:
        reasons.append("%d undecodable cells" % len(st.bad_cells))
    if st.walk_errors:
        reasons.extend(st.walk_errors)
    if st.invalid_text:
        reasons.append("%d rows saved with text that is not valid UTF-8 (bytes kept as "
                       "stored: damaged content)" % len(st.invalid_text))
    if st.suspect:
        reasons.append("%d rows saved whose content is in doubt (see suspect_rows)"
                       % len(st.suspect))
    if st.held_back.get("free pages unknown"):
        reasons.append("%d rows on orphan pages held back: they may be deleted rows"
                       % st.held_back["free pages unknown"])
    if not accounted:
        reasons.append("counts do not add up: identified %d != saved %d + duplicates %d + "
                       "quarantined %d" % (identified, saved, st.duplicates, st.quarantined))
    return {
        "identified": identified,
        "distinct_keys": len(st.keys),
        "saved": saved,
        "count_via_index": via_index,
        "duplicates_dropped": st.duplicates,
        "conflicting_versions": st.conflicts,
        "repaired": len(st.repaired),
        "repairs": st.repaired,
        "quarantined": st.quarantined,
        "quarantine_reasons": st.quarantine_reasons,
        "page_scan_only": st.page_scan_only,
        "orphan_pages": sorted(st.orphan_pages),
        "unreadable_pages": unreadable,
        "undecodable_cells": st.bad_cells,
        "pages_referenced_twice": st.double_refs,
        "walk_bad_ranges": st.walk_bad_ranges,
        "freelist_records_not_restored": st.freelist_records,
        "held_back_rows": st.held_back,
        "foreign_rows_read": st.foreign_read,
        "invalid_utf8_rows": sorted(st.invalid_text)[:100],
        "invalid_utf8_count": len(st.invalid_text),
        "suspect_rows": dict((str(k), st.suspect[k]) for k in sorted(st.suspect)[:100]),
        "suspect_count": len(st.suspect),
        "loss_rows": loss,
        "lost_known_from_indexes": len(st.lost_by_index),
        "lost_rowids_from_indexes": st.lost_by_index[:100],
        "held_back_not_in_indexes": sorted(st.index_held)[:100],
        "rowid_moved": dict((str(k), v) for k, v in sorted(st.index_moved.items())[:100]),
        "accounted": accounted,
        "verdict": "complete" if not reasons else "partial",
        "verdict_reasons": reasons,
    }


def write_report(s):
    tmp = s.args.report_path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(s.report, fh, indent=2, sort_keys=True, default=json_default)
        fh.flush()
        os.fsync(fh.fileno())
    os.rename(tmp, s.args.report_path)
    fsync_dir(os.path.dirname(os.path.abspath(s.args.report_path)))


def json_default(o):
    if isinstance(o, (bytes, bytearray)):
        return jsonable(bytes(o))
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def _output_format(con, mode):
    """The output's fields of source_format, read back through SQLite."""
    return {"journal_mode": mode[0][0].lower() if mode else None,
            "page_size": one_row(con, "PRAGMA page_size")[0],
            "encoding": one_row(con, "PRAGMA encoding")[0],
            "user_version": one_row(con, "PRAGMA user_version")[0],
            "application_id": one_row(con, "PRAGMA application_id")[0],
            "auto_vacuum": one_row(con, "PRAGMA auto_vacuum")[0]}
