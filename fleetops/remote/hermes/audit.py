"""Read-only health audit of every Hermes state.db on a host: one payload, one round trip.

Why each check exists is in the field reports: quick_check must get a large N (the
default cap of 100 hid structural damage behind FTS errors); counts must come from
table scans (count(*) answered from a damaged unique index hid a duplicated row); the
host's sqlite3 may lack `.recover`; a desktop backend nobody remembered held the file.

Read-only, provably:
- the file is never opened writable; `mode=ro` always, and never a checkpoint; how each
  journal state is opened without creating a file beside it is in audit_open;
- the checks run side by side on one read-only connection per core (run_checks), all reading
  one snapshot, so a live writer cannot make count(*) and count(*) NOT INDEXED disagree; what
  the audit reads of the files itself goes through descriptors pinned before the first
  connection opens (sqlite/pins: closing any descriptor of a file drops the process's locks on
  it, and with them the snapshot's protection from a checkpoint); a read without locks (a bare
  WAL-mode file, immutable) whose files changed meanwhile is read again;
- a -wal without -shm is judged as SQLite will replay it (audit_open.wal_image);
- FTS5's 'integrity-check' is an INSERT and fails on a read-only handle, so FTS tables
  are checked read-only by audit_fts (an fts5vocab walk of the whole index in TEMP). On
  SQLite >= 3.44 quick_check itself also runs FTS5's own integrity check.

The parts: audit_open (opening), audit_schema (object roles), audit_integrity (SQLite's own
checks), audit_honesty (table scans against indexes, entry by entry), audit_fts, audit_fts_source
(FTS text against its source), audit_host (tooling,
services, gateway pid), audit_backups, audit_verdict (the rules). This file runs them.
Stdlib only, Python 3.8+ / SQLite 3.31+.
"""
from __future__ import annotations

import copy
import os
import shutil
import sqlite3
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple, cast

from fleetops.remote.host.inputs import flag, number
from fleetops.remote.hermes import audit_backups
from fleetops.remote.hermes import audit_fts
from fleetops.remote.hermes import audit_fts_source
from fleetops.remote.hermes import audit_honesty
from fleetops.remote.hermes import audit_host
from fleetops.remote.hermes import audit_integrity
from fleetops.remote.hermes import audit_open
from fleetops.remote.hermes import audit_schema
from fleetops.remote.hermes import audit_verdict
from fleetops.remote.hermes.audit_schema import FtsSpecs, Objs
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import journal as hermes_journal
from fleetops.remote.hermes import paths as hermes_paths
from fleetops.remote.hermes import persistence as hermes_persistence
from fleetops.remote.sqlite import pins as sqlite_pins
from fleetops.remote.sqlite import workers as sqlite_workers

AUDIT_VERSION = 1
DEFAULTS: Dict[str, Any] = {
    "deep": False,
    "quick_check_max": 1000000,
    "backup_max_age_hours": 26,
    "wal_warn_mb": 64,
    "holders": True,
    "services": True,
    "tooling": True,
    "backup_verify_sha256": False,
    "busy_timeout": 10.0,
    "evidence_days": 7,
    "log_tail_bytes": 1048576,
    "stale_hours": 6,
    "write_probe": False,
    "jobs": 0,            # check workers: 0 = one per core this process may use
    "budget_gb": 0,       # > 0: on a bigger store, no FTS walk or FTS5 own check unless deep (budget())
    "cache_kib": 8192,    # SQLite page cache per connection
}


def budget(rec: Dict[str, Any], opts: Dict[str, Any]) -> Tuple[bool, Optional[str], Optional[str]]:
    """(covered, walk_skipped, tables_only) for this store: whether quick_check's FTS5 check is
    the FTS evidence, and, on a store over the budget (and not --deep), why the FTS index walk is
    not run and, where quick_check would run FTS5's own check (3.44+: ten times the b-trees'
    cost), why quick_check runs table by table instead."""
    covers = audit_fts.quick_check_covers_fts5()
    size = sum(((rec.get("files") or {}).get(k) or {}).get("size") or 0 for k in ("db", "wal"))
    if not opts["budget_gb"] or opts["deep"] or size <= opts["budget_gb"] * 2 ** 30:
        return covers, None, None
    over = "store is %.1f GB, over the audit budget of %g GB" % (size / 2.0 ** 30, opts["budget_gb"])
    if not covers:
        return False, over + ": FTS index walk not run (--deep or a larger --budget runs it)", None
    return (False,
            over + ": neither FTS5's own integrity check (inside SQLite %s's whole-file quick_check) nor the "
            "FTS index walk run (--deep or a larger --budget runs them)" % sqlite3.sqlite_version,
            over + ": quick_check ran table by table, every b-tree but without the page accounting (the "
            "freelist, pages on no b-tree or on two) that only its whole-file run does, and its error counts "
            "stop at 100 a table (--deep or a larger --budget runs it whole)")


@dataclass(frozen=True)
class CheckPlan:
    """What run_checks reads of one opened store, made once by _audit_image."""
    conn: sqlite3.Connection                    # the first connection, inside its read transaction
    connect: Callable[[], sqlite3.Connection]   # one more connection, opened as `conn` was (a worker's)
    token: bytes                                # sqlite_workers.commit_token, taken before `conn` began reading
    pins: sqlite_pins.Pins                      # the store's files, pinned before `conn` opened
    header: Dict[str, Any]                      # audit_open.read_header's
    mode: str                                   # how `conn` opened the file (audit_open.open_readonly)
    objs: Objs
    fts: FtsSpecs
    tooling: Dict[str, Any]                     # audit_host.host_tooling's
    opts: Dict[str, Any]                        # options()


def run_checks(rec: Dict[str, Any], plan: CheckPlan) -> None:
    """Integrity, index honesty, foreign keys and FTS as units on `jobs` read-only connections
    (one: every unit on `plan.conn`, in order, as one pass would run them), the integrity check
    on a connection of its own; the results go to `rec`.

    Every connection reads one snapshot: `plan.token` was taken before `plan.conn` began reading;
    when a commit lands while the others open, they are closed and every check runs on
    `plan.conn`. A statement that meets a corrupt page leaves its connection unable to create
    TEMP tables for the rest of its transaction, so each connection makes its fts5vocab tables
    before any check runs (and the integrity check, which meets corrupt pages first, has its
    connection to itself). The FTS units do not run, and their results are not
    reported, once the base tables are known damaged: a repair rebuilds every FTS index anyway.
    Each check's wall, CPU and bytes read go to rec["checks"]; what did not run, and why, to
    rec["skipped_checks"].
    """
    pragma = "integrity_check" if plan.opts["deep"] else "quick_check"
    owner_of = audit_integrity.PageOwners(plan.pins, plan.header, plan.objs,
                                          use_wal=(plan.mode != "immutable"))
    bases = sorted(audit_schema.base_tables(plan.objs), key=lambda x: x["name"])
    jobs = sqlite_workers.jobs_for(plan.opts["jobs"])
    conns = [plan.conn]
    note: Optional[str] = None
    integ_conn: Optional[sqlite3.Connection] = None
    try:
        integ_conn = plan.connect()
        while len(conns) < jobs:
            conns.append(plan.connect())
    except sqlite3.Error as exc:
        note = "only %d connection(s) opened (%s)" % (len(conns), audit_fts.failure(exc))
    if sqlite_workers.commit_token(plan.pins) != plan.token:
        note = "a commit landed while the audit opened its connections: every check ran on one"
        for c in conns[1:] + [integ_conn]:
            if c is not None:
                c.close()
        conns, integ_conn = [plan.conn], None
    covered, walk_skipped, tables_only = budget(rec, plan.opts)
    U = sqlite_workers.Unit
    units = [U("integrity", "integrity", lambda w: audit_integrity.integrity(
        integ_conn or w.conn, plan.objs, pragma, plan.opts["quick_check_max"], owner_of, tables_only=tables_only))]
    units += [U("honesty:" + o["name"], "index_honesty",
                lambda w, o=o: audit_honesty.table_honesty(w.conn, o, plan.objs)) for o in bases]
    phase1 = [u.name for u in units]
    honesty_units = units[1:]
    known: Dict[str, Optional[str]] = {}

    def base_failure() -> Optional[str]:
        if "why" not in known:
            if any(u.figures is None for u in units[:len(phase1)]):
                return None                     # not known yet: the FTS unit runs
            known["why"] = audit_verdict.base_tables_fail(units[0].result, dict(
                (u.name.split(":", 1)[1], u.result) for u in honesty_units))
        return known["why"]

    records, fts_list = audit_fts.fts_units(plan.objs, plan.fts, plan.tooling, walk_skipped,
                                            1 if len(conns) == 1 else 4 * len(conns),
                                            skip=lambda: "base tables damaged" if base_failure() else None,
                                            covered=covered)
    units += fts_list
    # FTS tables fed from one base table: one after another, one scan of it
    source_cache: Dict[str, Tuple[int, int]] = {}
    after: Dict[str, Tuple[str, ...]] = {}
    for name in sorted(plan.fts):
        if records[name]["checked"]:
            src = (audit_fts_source.source_of(plan.objs, name) or (name,))[0]
            units.append(U("fts_source:" + name, "fts_source", lambda w, name=name: audit_fts_source.fts_source(
                w.conn, plan.objs, name, source_cache), deps=after.get(src, ()),
                skip=lambda: "base tables damaged" if base_failure() else None))
            after[src] = ("fts_source:" + name,)
    units.append(U("foreign_keys", "foreign_keys", lambda w: audit_integrity.foreign_keys(w.conn, dict(
        (u.name.split(":", 1)[1], u.result) for u in honesty_units)), deps=phase1[1:]))
    meter = sqlite_workers.Meter()
    try:
        by = sqlite_workers.run_units(units, conns, prepare=lambda w: audit_fts.fts_prepare(w, plan.fts, records))
    finally:
        for c in conns[1:] + [integ_conn]:
            if c is not None:
                c.close()
    wall = meter.stop()["seconds"]
    rec["integrity"] = by["integrity"].result
    rec["honesty"] = dict((o["name"], by["honesty:" + o["name"]].result) for o in bases)
    rec["foreign_keys"] = by["foreign_keys"].result
    skipped = rec["skipped_checks"]
    if tables_only:
        skipped.append({"check": "page_accounting", "reason": tables_only})
    why = base_failure()
    if why:
        for name, r in records.items():
            if r["checked"]:
                records[name] = dict(audit_fts.fts_record(plan.fts[name]), skipped="base tables already damaged "
                                     "(%s): the FTS checks add nothing to the verdict" % why)
                skipped.append({"check": "fts:" + name, "reason": records[name]["skipped"]})
    else:
        audit_fts.fts_finish(records, plan.fts, by, rec["integrity"])
        for name in records:
            src = by.get("fts_source:" + name)
            if src is not None and src.result is not None:
                records[name]["source"] = src.result
                if src.result["ok"] is False:
                    records[name].setdefault("errors", []).append(audit_fts_source.reason(name, src.result))
        for name, r in records.items():
            if r.get("walk_skipped"):
                skipped.append({"check": "fts_walk:" + name, "reason": r["walk_skipped"]})
            elif r.get("quick_check_stopped"):
                skipped.append({"check": "fts:" + name, "reason": r["reason"]})
    rec["fts"] = records
    checks = rec["checks"]
    for u in units:
        if u.figures is not None:
            sqlite_workers.add_figures(checks.setdefault(u.check, {}), u.figures)
    rec["parallel"] = {"jobs": len(conns), "asked": jobs, "note": note, "checks_seconds": wall,
                       "workers_used": len(set(u.worker for u in units if u.worker is not None)),
                       "cache_kib_per_connection": int(plan.opts["cache_kib"])}


def audit_db(entry: Dict[str, Any], opts: Dict[str, Any], tooling: Dict[str, Any], now: float) -> Dict[str, Any]:
    """Every check on one state.db; never raises (a crash becomes the record's `error`)."""
    started = time.time()
    db = entry.get("db")
    rec: Dict[str, Any] = {"profile": entry.get("profile"), "home": entry.get("home"), "db": db, "verdict": None,
           "conditions": [], "reasons": [], "warnings": [], "errors_by_object": {}, "errors_total": 0,
           "files": None, "header": None, "open_mode": None, "sqlite": None, "integrity": None,
           "honesty": None, "foreign_keys": None, "fts": None, "fts_triggers": None, "holders": None,
           "gateway_pid": None, "service": None, "backups": None, "persistence": None, "journal": None, "wal": None,
           "checks": {}, "skipped_checks": [], "error": None}
    if entry.get("error"):
        rec["verdict"] = "missing"
        rec["reasons"] = [entry["error"]]
        return rec
    fresh = copy.deepcopy(rec)
    try:
        for attempt in range(IMMUTABLE_READS):
            try:
                # an entry without an error names its db (hermes_paths)
                _audit_db(rec, cast(str, db), entry, opts, tooling, now, last=attempt == IMMUTABLE_READS - 1)
                break
            except StoreChanged:
                rec.clear()
                rec.update(copy.deepcopy(fresh), reread=attempt + 1)
    except Exception as exc:  # the audit of one db must never take down the others
        rec["error"] = "%s: %s" % (type(exc).__name__, exc)
        rec["traceback"] = traceback.format_exc()[-2000:]
        if rec["verdict"] is None:
            rec["verdict"] = "unreadable"
            rec["reasons"].append("audit failed: %s" % rec["error"])
    try:
        hermes_persistence.apply(rec, entry, opts, now)
    except Exception as exc:  # evidence that cannot be read must not hide the file's verdict
        rec["warnings"].append({"code": "persistence_unchecked", "msg": "persistence evidence not read: %s: %s"
                                % (type(exc).__name__, exc)})
    rec.pop("_newest_message", None)
    rec["elapsed"] = round(time.time() - started, 3)
    return rec


class StoreChanged(Exception):
    """The file changed under an immutable read (a writer started, wrote and checkpointed)."""


IMMUTABLE_READS = 3   # a read without locks whose file changed is read again, this many times in all


def _audit_db(rec: Dict[str, Any], db: str, entry: Dict[str, Any], opts: Dict[str, Any], tooling: Dict[str, Any],
              now: float, last: bool = True) -> None:
    """One read of the store; raises StoreChanged, unless `last`, when an immutable read's files
    changed while it read (a bare WAL-mode file takes no locks: a writer that opens it, writes and
    checkpoints mid-read makes the figures come from two images)."""
    home = entry["home"]
    files: Dict[str, Any] = {"db": audit_open.file_facts(db), "wal": audit_open.file_facts(db + "-wal"),
             "shm": audit_open.file_facts(db + "-shm")}
    free, total = audit_open.free_space(db)
    files["free_bytes"], files["fs_bytes"] = free, total
    rec["files"] = files
    if opts["holders"]:
        t0 = time.monotonic()
        rec["holders"] = hermes_holders.scan(db)  # before opening: the audit's own handle is excluded anyway
        rec["holders_seconds"] = round(time.monotonic() - t0, 4)   # bench/audit.py prints it
    if home and os.path.isdir(home):
        rec["gateway_pid"] = audit_host.gateway_pid(home)
        rec["backups"] = audit_backups.backups(home, db, entry["profile"], opts["_root"], now,
                                               opts["backup_verify_sha256"])
    if files["db"] is None:
        rec["verdict"] = "missing"
        rec["reasons"].append("no %s" % db if not os.path.lexists(db) else "cannot stat %s" % db)
        if rec["holders"] and rec["holders"].get("retired"):
            rec["conditions"] = ["retired_wal"]
        audit_verdict.add_warnings(rec, opts, tooling)
        return
    denied = hermes_paths.access_problem(db)
    if denied:  # say so plainly, with owner and mode, instead of "cannot read"
        rec["verdict"] = "unreadable"
        rec["reasons"].append("permission denied: " + denied)
        audit_verdict.add_warnings(rec, opts, tooling)
        return
    header = audit_open.read_header(db)
    rec["header"] = header
    if header["valid"]:
        rec["journal"] = hermes_journal.advice(header["journal_mode"])
    if not header["valid"]:
        rec["verdict"] = "unreadable"
        rec["reasons"].append(header["reason"])
        audit_verdict.add_warnings(rec, opts, tooling)
        return
    image, image_dir, image_warns, rec["wal"] = audit_open.wal_image(db, header)
    try:
        _audit_image(rec, image, header, opts, tooling, last)
    finally:
        rec["warnings"][:0] = image_warns
        if image_dir:
            shutil.rmtree(image_dir, ignore_errors=True)


def _audit_image(rec: Dict[str, Any], db: str, header: Dict[str, Any], opts: Dict[str, Any],
                 tooling: Dict[str, Any], last: bool) -> None:
    """The checks on the image SQLite opens: `db` itself, or wal_image's private copy of it."""
    pins = sqlite_pins.Pins(db)    # before the first connection: see sqlite/pins
    try:
        conn, mode, warns = audit_open.open_readonly(db, header, opts["busy_timeout"])
        uri = audit_open.conn_uri(db, mode)
        audit_open.bound_memory(conn, opts)
    except sqlite3.Error as exc:
        pins.close()
        rec["verdict"] = "unreadable"
        rec["reasons"].append("cannot open: %s: %s" % (type(exc).__name__, exc))
        audit_verdict.add_warnings(rec, opts, tooling)
        return
    rec["open_mode"] = mode
    rec["warnings"].extend(warns)
    try:
        token = sqlite_workers.commit_token(pins)
        conn.execute("BEGIN")  # one read snapshot for every figure
        try:
            objs, fts = audit_schema.read_schema(conn)
        except sqlite3.Error as exc:
            rec["verdict"] = "unreadable"
            rec["reasons"].append("schema unreadable: %s: %s" % (type(exc).__name__, exc))
            audit_verdict.add_warnings(rec, opts, tooling)
            return
        sq: Dict[str, Any] = {"page_count": None, "freelist_count": None, "schema_version": None, "synchronous": None,
              "journal_mode": header["journal_mode"], "objects": len(objs)}
        for key in ("page_count", "freelist_count"):
            try:
                sq[key] = conn.execute("PRAGMA %s" % key).fetchone()[0]
            except sqlite3.Error:
                pass
        try:
            sq["synchronous"] = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(
                conn.execute("PRAGMA synchronous").fetchone()[0])
        except sqlite3.Error:
            pass
        if "schema_version" in objs:
            try:
                row = conn.execute("SELECT max(version) FROM schema_version NOT INDEXED").fetchone()
                sq["schema_version"] = row[0] if row else None
            except sqlite3.Error as exc:
                sq["schema_version"] = "unreadable: %s" % exc
        rec["sqlite"] = sq
        run_checks(rec, CheckPlan(conn=conn, connect=lambda: audit_open.worker_connection(uri, opts), token=token,
                                  pins=pins, header=header, mode=mode, objs=objs, fts=fts, tooling=tooling,
                                  opts=opts))
        rec["fts_triggers"] = sum(1 for o in objs.values() if o["type"] == "trigger"
                                  and any(o["name"].startswith(v) or v in o["sql"] for v in fts)) if fts else 0
        rec["_newest_message"] = hermes_persistence.newest_message(conn, objs)
    finally:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        conn.close()
        changed = mode == "immutable" and pins.changed()
        pins.close()
        if changed and not last:
            raise StoreChanged()
    if changed:
        rec["warnings"].append({"code": "store_changing", "msg": "the file changed under each of %d reads without "
                                "locks (no -wal when it was opened, a writer since): figures may mix two images"
                                % IMMUTABLE_READS})
    rec["verdict"], rec["conditions"], rec["reasons"] = audit_verdict.classify(rec)
    rec["errors_by_object"] = audit_verdict.errors_by_object(rec)
    rec["errors_total"] = sum(rec["errors_by_object"].values())
    audit_verdict.add_warnings(rec, opts, tooling)


def options(args: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Normalised options with defaults (playbook values arrive as strings after templating)."""
    args = args or {}
    o = dict(DEFAULTS)
    o["deep"] = flag(args.get("deep", False))
    o["quick_check_max"] = max(1, number(args.get("quick_check_max"), DEFAULTS["quick_check_max"], int))
    o["backup_max_age_hours"] = number(args.get("backup_max_age_hours"), DEFAULTS["backup_max_age_hours"])
    o["wal_warn_mb"] = number(args.get("wal_warn_mb"), DEFAULTS["wal_warn_mb"])
    o["busy_timeout"] = number(args.get("busy_timeout"), DEFAULTS["busy_timeout"])
    o["evidence_days"] = max(0.0, number(args.get("evidence_days"), DEFAULTS["evidence_days"]))
    o["log_tail_bytes"] = max(4096, number(args.get("log_tail_bytes"), DEFAULTS["log_tail_bytes"], int))
    o["stale_hours"] = number(args.get("stale_hours"), DEFAULTS["stale_hours"])
    o["jobs"] = max(0, number(args.get("jobs"), DEFAULTS["jobs"], int))
    o["budget_gb"] = max(0.0, number(args.get("budget_gb"), DEFAULTS["budget_gb"]))
    o["cache_kib"] = max(512, number(args.get("cache_kib"), DEFAULTS["cache_kib"], int))
    o["_check"] = flag(args.get("_check", False))
    for key in ("holders", "services", "tooling", "backup_verify_sha256", "write_probe"):
        if key in args and args[key] is not None and args[key] != "":
            o[key] = flag(args[key])
    return o


def main(args: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """Audit every profile's state.db (or `db_path` alone); the module contract plus the figures."""
    args = args or {}
    opts = options(args)
    now = time.time()
    try:
        if args.get("db_path"):
            found = hermes_paths.single(args["db_path"])
        else:
            found = hermes_paths.discover(args.get("hermes_home") or None, args.get("hermes_profiles") or None)
        opts["_root"] = found["root"]
        tooling = audit_host.host_tooling() if opts["tooling"] else {"sqlite_version": sqlite3.sqlite_version,
                                                          "fts5": True, "trigram": True, "skipped": True}
        svc = audit_host.services() if opts["services"] and not args.get("db_path") else None
        dbs = []
        for entry in found["profiles"]:
            rec = audit_db(entry, opts, tooling, now)
            if svc is not None and entry.get("profile") not in (None, "-"):
                unit = "hermes-gateway.service" if entry["profile"] == "default" \
                    else "hermes-gateway-%s.service" % entry["profile"]
                rec["service"] = dict(svc["units"].get(unit) or {"active": "absent"}, unit=unit)
            dbs.append(rec)
    except Exception as exc:
        return {"changed": False, "failed": True, "skipped": False,
                "msg": "audit failed: %s: %s" % (type(exc).__name__, exc), "traceback": traceback.format_exc()[-4000:]}
    counts: Dict[str, int] = {}
    for r in dbs:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    msg = "%d database(s): %s" % (len(dbs), ", ".join("%d %s" % (n, v) for v, n in sorted(
        counts.items(), key=lambda kv: -audit_verdict.SEVERITY.get(kv[0], 6))))
    return {"changed": False, "failed": False, "skipped": False, "msg": msg,
            "audit_version": AUDIT_VERSION, "hermes_root": found["root"],
            "active_profile": found.get("active_profile"),
            "host_tooling": tooling, "services": svc, "databases": dbs,
            "worst": audit_verdict.worst(r["verdict"] for r in dbs),
            "healthy": all(r["verdict"] == "healthy" for r in dbs) and bool(dbs),
            "audited_at": audit_backups.iso(now)}
