"""Controller side of the audit: the `hermes_audit` module, the fleet table, and stored figures.

The host does the measuring (fleetops/remote/hermes/audit.py, one round trip); this file
turns per-host results into one table, worst first, and keeps per run/host/profile
figures in runs.db so `fleetops report --audit` can show trends across runs.
"""
from __future__ import annotations

import datetime as _dt
import json
import statistics
import threading

from rich.markup import escape

from fleetops.display import Col, FittedTable
from fleetops.engine.events import EventSink
from fleetops.engine.module import Arg, Module, TaskContext, flag, result
from fleetops.hermes.audit_system import arch_text, load_system, store_system, system_of, system_text

VERDICT_STYLES = {
    "healthy": "green", "fts_index_damage": "yellow", "index_damage": "yellow",
    "structural_corruption": "bold red", "unreadable": "bold red", "retired_wal": "bold magenta",
    "missing": "dim", "unreachable": "red", "audit_failed": "red", "not_persisting": "bold red",
}
# Pseudo-verdicts for hosts whose audit never ran: rank with the worst, never read as healthy.
HOST_SEVERITY = {"unreachable": 6, "audit_failed": 6}

AUDIT_DDL = """
CREATE TABLE IF NOT EXISTS audit_db (
    run_id TEXT NOT NULL,
    host TEXT NOT NULL,
    profile TEXT NOT NULL,
    db_path TEXT,
    verdict TEXT NOT NULL,
    conditions TEXT,
    errors_total INTEGER,
    errors_by_object TEXT,
    holders TEXT,
    holders_status TEXT,
    backup_age_hours REAL,
    wal_bytes INTEGER,
    db_bytes INTEGER,
    warnings TEXT,
    reasons TEXT,
    audited_at TEXT,
    PRIMARY KEY (run_id, host, profile)
);
CREATE INDEX IF NOT EXISTS audit_db_host ON audit_db(host, profile, run_id);
CREATE TABLE IF NOT EXISTS audit_persistence (
    run_id TEXT NOT NULL,
    host TEXT NOT NULL,
    profile TEXT NOT NULL,
    persisting TEXT,
    write_errors INTEGER,
    write_errors_last_hour INTEGER,
    first_error TEXT,
    last_error TEXT,
    fallback_files INTEGER,
    newest_message TEXT,
    last_write TEXT,
    gateway_uptime_s REAL,
    fstype TEXT,
    evidence TEXT,
    PRIMARY KEY (run_id, host, profile)
);
CREATE TABLE IF NOT EXISTS audit_host (
    run_id TEXT NOT NULL,
    host TEXT NOT NULL,
    status TEXT NOT NULL,
    msg TEXT,
    python TEXT,
    sqlite_version TEXT,
    fts5 INTEGER,
    trigram INTEGER,
    sqlite3_shell TEXT,
    recover TEXT,
    user_manager TEXT,
    PRIMARY KEY (run_id, host)
)
"""


class HermesAudit(Module):
    """Read-only audit of every Hermes profile's state.db on the host (one payload round trip)."""

    name = "hermes_audit"
    args = {
        "deep": Arg((bool, str), default=False),
        "hermes_home": Arg(str, default=None),
        "hermes_profiles": Arg((list, str), default=None),
        "quick_check_max": Arg((int, str), default=None),
        "backup_max_age_hours": Arg((int, float, str), default=None),
        "wal_warn_mb": Arg((int, float, str), default=None),
        "holders": Arg((bool, str), default=True),
        "services": Arg((bool, str), default=True),
        "tooling": Arg((bool, str), default=True),
        "backup_verify_sha256": Arg((bool, str), default=False),
        "evidence_days": Arg((int, float, str), default=None),
        "log_tail_bytes": Arg((int, str), default=None),
        "stale_hours": Arg((int, float, str), default=None),
        "write_probe": Arg((bool, str), default=False),
        "budget_gb": Arg((int, float, str), default=None),
        "jobs": Arg((int, str), default=None),
        "timeout": Arg((int, float), default=None),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        pargs = {k: v for k, v in args.items() if v not in (None, "") and k != "timeout"}
        pargs["deep"] = flag(args.get("deep"))
        res = ctx.payload("hermes_audit", pargs, timeout=args.get("timeout"))
        if not isinstance(res, dict):
            return result(failed=True, msg=f"hermes_audit payload returned {type(res).__name__}")
        out = result(changed=False, failed=bool(res.get("failed")), msg=str(res.get("msg") or ""))
        out.update({k: v for k, v in res.items() if k not in out})
        return out


# --- rows -------------------------------------------------------------------------------------

def _fmt_errors(by_obj: dict, limit: int = 4) -> str:
    if not by_obj:
        return "-"
    items = sorted(by_obj.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{n} {name}" for name, n in items[:limit])
    return text + (f", +{len(items) - limit} more" if len(items) > limit else "")


def _holders_text(h: dict | None) -> str:
    if h is None:
        return "not scanned"
    from fleetops.remote.hermes.holders import summary
    return summary(h)


def _journal_text(j: dict | None) -> str:
    """The store's journal mode, and the one Hermes 0.20.1+ picks on that host's SQLite where they
    differ ("wal, Hermes: delete (SQLite 3.40.1 has the WAL-reset bug)")."""
    if not j:
        return "-"
    if j["mode"] == j["hermes_new_store_mode"]:
        return j["mode"]
    why = " (SQLite %s has the WAL-reset bug)" % j["sqlite_version"] if j.get("wal_reset_bug") else ""
    return "%s, Hermes: %s%s" % (j["mode"], j["hermes_new_store_mode"], why)


def rows_from(results: dict) -> list[dict]:
    """One row per (host, profile) from {host: module result}; hosts without a result get a pseudo-verdict."""
    rows = []
    for host, res in results.items():
        res = res or {}
        dbs = res.get("databases")
        if res.get("unreachable") or dbs is None:
            verdict = "unreachable" if res.get("unreachable") else "audit_failed"
            rows.append({"host": host, "profile": "*", "db": None, "verdict": verdict, "conditions": [],
                         "errors_by_object": {}, "errors_total": None, "holders": res.get("msg") or verdict,
                         "holders_status": None, "backup_age_hours": None, "wal_bytes": None, "db_bytes": None,
                         "warnings": [], "reasons": [str(res.get("msg") or "")], "audited_at": None,
                         "persisting": None, "persistence": None})
            continue
        for d in dbs:
            files = d.get("files") or {}
            nv = (d.get("backups") or {}).get("newest_verified")
            rows.append({
                "host": host, "profile": d.get("profile"), "db": d.get("db"), "verdict": d.get("verdict"),
                "conditions": d.get("conditions") or [], "errors_by_object": d.get("errors_by_object") or {},
                "errors_total": d.get("errors_total"), "holders": _holders_text(d.get("holders")),
                "holders_status": (d.get("holders") or {}).get("status"),
                "backup_age_hours": nv.get("age_hours") if nv else None,
                "wal_bytes": (files.get("wal") or {}).get("size"),
                "db_bytes": (files.get("db") or {}).get("size"),
                "warnings": [w.get("code") for w in d.get("warnings") or []],
                "reasons": d.get("reasons") or [], "audited_at": res.get("audited_at"),
                "persisting": (d.get("persistence") or {}).get("persisting"),
                "persistence": persistence_row(d.get("persistence")),
                "journal": _journal_text(d.get("journal")),
                "skipped": [sk.get("check") for sk in d.get("skipped_checks") or []],
                "skipped_why": [f"{sk.get('check')}: {sk.get('reason')}" for sk in d.get("skipped_checks") or []],
                "cost": audit_cost(d), "system": system_of(res),
            })
    return sort_rows(rows)


def audit_cost(d: dict) -> dict:
    """What one store's audit cost its host: wall seconds (every check, the holder scan and the
    evidence), the checks' CPU seconds and what they read from the disk (None where unmeasured)."""
    checks = list((d.get("checks") or {}).values())
    reads = [c.get("read_bytes") for c in checks]
    return {"seconds": d.get("elapsed"),
            "cpu_seconds": round(sum(c.get("cpu_seconds") or 0 for c in checks), 3) if checks else None,
            "read_bytes": sum(reads) if reads and None not in reads else None}


def cost_summary(rows: list[dict]) -> str | None:
    """The audit's cost over the fleet in one line ("audit cost: 6 stores, 0.70 s median, 1.90 s most
    (lab03 default), 5.10 CPU s of checks, 1.20 GB read from disk"), or None."""
    timed = [r for r in rows if (r.get("cost") or {}).get("seconds") is not None]
    if not timed:
        return None
    top = max(timed, key=lambda r: r["cost"]["seconds"])
    median = statistics.median(r["cost"]["seconds"] for r in timed)
    cpu = sum(r["cost"]["cpu_seconds"] or 0 for r in timed)
    reads = [r["cost"]["read_bytes"] for r in timed]
    read = "disk reads unmeasured" if None in reads else f"{sum(reads) / 1e9:.2f} GB read from disk"
    return (f"audit cost: {len(timed)} store{'s' if len(timed) != 1 else ''}, {median:.2f} s median, "
            f"{top['cost']['seconds']:.2f} s most ({top['host']} {top['profile']}), {cpu:.2f} CPU s of checks, {read}")


def persistence_row(ev: dict | None) -> dict | None:
    """The persistence evidence a fleet row carries: counts and times, not the whole record."""
    if not ev:
        return None
    from fleetops.remote.hermes.persistence import WRITE_KINDS, summary
    kinds = (ev.get("logs") or {}).get("kinds") or {}
    errs = {k: {f: v.get(f) for f in ("count", "last_hour", "first", "last", "sample")}
            for k, v in kinds.items() if k in WRITE_KINDS}
    fb = ev.get("fallback") or {}
    gw = ev.get("gateway") or {}
    fs = ev.get("filesystem") or {}
    return {
        "persisting": ev.get("persisting"), "summary": summary(ev), "reasons": ev.get("reasons") or [],
        "write_errors": errs, "write_errors_total": sum(v["count"] or 0 for v in errs.values()),
        "write_errors_last_hour": sum(v["last_hour"] or 0 for v in errs.values()),
        "first_error": min((v["first"] for v in errs.values() if v["first"]), default=None),
        "last_error": max((v["last"] for v in errs.values() if v["last"]), default=None),
        "errors_after_last_write": ev.get("errors_after_last_write") or {},
        "fallback_files": sum((fb.get(k) or {}).get("newer", 0) for k in ("sessions_jsonl", "pending_messages")),
        "newest_message": (ev.get("newest_message") or {}).get("at"),
        "last_write": (ev.get("last_write") or {}).get("at"),
        "gateway": {k: gw.get(k) for k in ("pid", "started", "uptime_s", "holds_store")} if gw else None,
        "filesystem": fs.get("fstype"), "wal_unsafe": fs.get("wal_unsafe"),
        "repair_attempts": (ev.get("repair_attempts") or {}).get("fields") if ev.get("repair_attempts") else None,
        "write_probe": ev.get("write_probe"),
    }


def severity(verdict: str) -> int:
    # imported here: every `fleetops run` loads this module (the registry), few need the payload
    from fleetops.remote.hermes.audit_verdict import SEVERITY
    return HOST_SEVERITY.get(verdict, SEVERITY.get(verdict, 6))


def sort_rows(rows: list[dict]) -> list[dict]:
    """Worst first: verdict severity, then error count, then warnings, then host/profile."""
    return sorted(rows, key=lambda r: (-severity(r["verdict"]), -(r.get("errors_total") or 0),
                                       -len(r.get("warnings") or []), str(r["host"]), str(r["profile"])))


def all_healthy(rows: list[dict]) -> bool:
    return bool(rows) and all(r["verdict"] == "healthy" for r in rows)


def _mb(n) -> str:
    return "-" if n is None else f"{n / 1048576:.1f} MB"


def _age(h) -> str:
    if h is None:
        return "none"
    return f"{h:.1f} h" if h < 48 else f"{h / 24:.1f} d"


PERSISTING_STYLES = {"no": "bold red", "errors": "yellow", "yes": "green"}


def _persisting_cell(r: dict) -> str:
    p = r.get("persistence") or {}
    text = p.get("summary") or "-"
    style = PERSISTING_STYLES.get(r.get("persisting") or "", "dim")
    return f"[{style}]{escape(text)}[/]"


def _mb_short(n) -> str:
    return "-" if n is None else f"{n / 1048576:.1f}M"


def _errors_short(r: dict) -> str:
    return "-" if not r.get("errors_total") else str(r["errors_total"])


# The fleet table's columns, in order: one entry per column (narrow terminals drop the wide-only
# ones and show the `detail` ones as a line under the table).
FLEET_COLUMNS = [
    Col("host", lambda r: escape(str(r["host"])), ident=True),
    Col("profile", lambda r: escape(str(r["profile"])), ident=True),
    Col("arch", lambda r: escape(arch_text(r))),
    Col("verdict", lambda r: f"[{VERDICT_STYLES.get(r['verdict'], 'bold')}]{escape(str(r['verdict']))}[/]",
        ident=True),
    Col("errors by object", lambda r: escape(_fmt_errors(r.get("errors_by_object") or {})), short="errors",
        narrow=_errors_short, justify="left"),
    Col("persisting", _persisting_cell, wide_only=True, detail=True),
    Col("holders", lambda r: escape(str(r.get("holders") or "-")), wide_only=True, detail=True),
    Col("backup age", lambda r: _age(r.get("backup_age_hours")), short="backup"),
    Col("WAL", lambda r: _mb(r.get("wal_bytes")), narrow=lambda r: _mb_short(r.get("wal_bytes")), justify="right"),
    Col("journal", lambda r: escape(r.get("journal") or "-"), wide_only=True, detail=True),
    Col("system", lambda r: escape(system_text(r)), wide_only=True, detail=True),
    Col("warnings", lambda r: escape(", ".join((r.get("warnings") or []) + (
        ["%d not checked" % len(r["skipped"])] if r.get("skipped") else [])) or "-"), wide_only=True, detail=True),
]


def fleet_summary(rows: list[dict]) -> str:
    """The one line that comes first: "12 databases on 10 hosts: 1 structural_corruption, 11 healthy"."""
    counts: dict = {}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    hosts = len({r["host"] for r in rows})
    return (f"{len(rows)} databases on {hosts} hosts: "
            + ", ".join(f"{n} {v}" for v, n in sorted(counts.items(), key=lambda kv: -severity(kv[0]))))


def fleet_table(rows: list[dict], title: str = "Hermes state.db audit") -> FittedTable:
    return FittedTable(FLEET_COLUMNS, rows, title=title, key=lambda r: f"{r['host']} {r['profile']}:",
                       detail_when=lambda r: r["verdict"] != "healthy" or r.get("persisting") in ("no", "errors"))


def print_fleet(rows: list[dict], console, title: str = "Hermes state.db audit") -> None:
    console.print(escape(fleet_summary(rows)))
    console.print(fleet_table(rows, title))
    for r in rows:
        if r["verdict"] not in ("healthy",) and r.get("reasons"):
            console.print(f"[bold]{escape(str(r['host']))}[/] {escape(str(r['profile']))}: "
                          + escape("; ".join(str(x) for x in r["reasons"][:4])))
    for r in rows:  # a verdict that rests on less evidence says so, whatever the verdict
        if r.get("skipped_why"):
            console.print(f"[bold]{escape(str(r['host']))}[/] {escape(str(r['profile']))} not checked: "
                          + escape("; ".join(r["skipped_why"])))
    print_persistence_evidence(rows, console)
    cost = cost_summary(rows)
    if cost:
        console.print(escape(cost), style="dim")


def print_persistence_evidence(rows: list[dict], console) -> None:
    """Per database with write errors: each kind with its count, last-hour count, first and last time."""
    for r in rows:
        p = r.get("persistence") or {}
        errs = p.get("write_errors") or {}
        if not errs and not (p.get("write_probe") or {}).get("done"):
            continue
        parts = [f"{k} {v['count']} (last hour {v['last_hour']}, first {v['first']}, last {v['last']})"
                 for k, v in sorted(errs.items(), key=lambda kv: -(kv[1]["count"] or 0))]
        wp = p.get("write_probe") or {}
        if wp.get("done"):
            parts.append("write probe " + ("ok" if wp.get("ok") else f"FAILED: {wp.get('error')}")
                         + f" in {wp.get('ms')} ms")
        elif wp.get("refused"):
            parts.append(f"write probe refused: {wp['refused']}")
        console.print(f"[bold]{escape(str(r['host']))}[/] {escape(str(r['profile']))} write errors in Hermes' logs: "
                      + escape("; ".join(parts)))


# --- collecting from the event stream ---------------------------------------------------------

class AuditCollector(EventSink):
    """Keeps each host's hermes_audit result (and unreachable/failed hosts) as the run goes."""

    def __init__(self, module: str = "hermes_audit"):
        self.module = module
        self.run_id = None
        self.results: dict = {}
        self._lock = threading.Lock()

    def run_start(self, run_id, playbook, inventory, options):
        self.run_id = run_id

    def host_result(self, host, play_index, task_index, task_name, module, result, started, ended):
        result = result or {}
        with self._lock:
            if module == self.module or (result.get("unreachable") and host not in self.results):
                self.results[host] = result
            elif result.get("failed") and host not in self.results:
                self.results[host] = result


# --- storage ----------------------------------------------------------------------------------

def ensure_tables(store) -> None:
    with store.connect() as c:
        for stmt in AUDIT_DDL.split(";"):
            if stmt.strip():
                c.execute(stmt)


def store_audit(store, run_id: str, results: dict) -> None:
    """Figures per run/host/profile (audit_db) and per run/host tooling (audit_host) into runs.db."""
    ensure_tables(store)
    rows = rows_from(results)
    clean = store.clean
    with store.connect() as c:
        for r in rows:
            c.execute("INSERT OR REPLACE INTO audit_db VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
                run_id, r["host"], r["profile"], r["db"], r["verdict"], json.dumps(r["conditions"]),
                r["errors_total"], json.dumps(r["errors_by_object"]), r["holders"], r["holders_status"],
                r["backup_age_hours"], r["wal_bytes"], r["db_bytes"], json.dumps(r["warnings"]),
                json.dumps(clean(r["reasons"])), r["audited_at"]))
        store_persistence(c, run_id, rows, clean)
        store_system(c, run_id, results)
        for host, res in results.items():
            res = res or {}
            tool = res.get("host_tooling") or {}
            status = "unreachable" if res.get("unreachable") else ("ok" if res.get("databases") is not None
                                                                   else "failed")
            c.execute("INSERT OR REPLACE INTO audit_host VALUES (?,?,?,?,?,?,?,?,?,?,?)", (
                run_id, host, status, clean(str(res.get("msg") or "")), tool.get("python"),
                tool.get("sqlite_version"), int(bool(tool.get("fts5"))), int(bool(tool.get("trigram"))),
                tool.get("sqlite3_shell"), tool.get("recover"), (res.get("services") or {}).get("user_manager")))


def store_persistence(c, run_id: str, rows: list[dict], clean=lambda x: x) -> None:
    """One audit_persistence row per audited database: the condition's figures, for trends.
    Log lines are Hermes' own (it redacts them); they are scrubbed again like every stored result."""
    for r in rows:
        p = clean(r.get("persistence"))
        if not p:
            continue
        c.execute("INSERT OR REPLACE INTO audit_persistence VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", (
            run_id, r["host"], r["profile"], p["persisting"], p["write_errors_total"], p["write_errors_last_hour"],
            p["first_error"], p["last_error"], p["fallback_files"], p["newest_message"], p["last_write"],
            (p.get("gateway") or {}).get("uptime_s"), p["filesystem"], json.dumps(p, default=str)))


def _table_exists(conn) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name='audit_db'").fetchone() is not None


def load_rows(conn, run_id: str) -> list[dict]:
    cols = ("host", "profile", "db", "verdict", "conditions", "errors_total", "errors_by_object", "holders",
            "holders_status", "backup_age_hours", "wal_bytes", "db_bytes", "warnings", "reasons", "audited_at")
    rows = []
    for rec in conn.execute("SELECT host, profile, db_path, verdict, conditions, errors_total, errors_by_object,"
                            " holders, holders_status, backup_age_hours, wal_bytes, db_bytes, warnings, reasons,"
                            " audited_at FROM audit_db WHERE run_id=?", (run_id,)):
        r = dict(zip(cols, rec))
        for k in ("conditions", "errors_by_object", "warnings", "reasons"):
            r[k] = json.loads(r[k]) if r[k] else ([] if k != "errors_by_object" else {})
        rows.append(r)
    evidence, systems = load_persistence(conn, run_id), load_system(conn, run_id)
    for r in rows:
        r["system"] = systems.get((run_id, r["host"]))
        r["persistence"] = evidence.get((r["host"], r["profile"]))
        r["persisting"] = (r["persistence"] or {}).get("persisting")
    return sort_rows(rows)


def _has_persistence(conn) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name='audit_persistence'").fetchone() is not None


def load_persistence(conn, run_id: str) -> dict:
    """{(host, profile): persistence evidence} of one run; empty for runs stored before it existed."""
    if not _has_persistence(conn):
        return {}
    return {(h, p): json.loads(e) for h, p, e in conn.execute(
        "SELECT host, profile, evidence FROM audit_persistence WHERE run_id=?", (run_id,)) if e}


def persistence_trends(conn, run_ids: list) -> dict:
    """{(host, profile): {run_id: (persisting, write_errors, write_errors_last_hour, fallback_files)}}."""
    if not run_ids or not _has_persistence(conn):
        return {}
    marks = ",".join("?" * len(run_ids))
    out: dict = {}
    for rid, h, p, pers, we, weh, fb in conn.execute(
            f"SELECT run_id, host, profile, persisting, write_errors, write_errors_last_hour, fallback_files"
            f" FROM audit_persistence WHERE run_id IN ({marks})", list(run_ids)):
        out.setdefault((h, p), {})[rid] = (pers, we, weh, fb)
    return out


def load_trends(conn, upto_run: str, runs: int = 10) -> dict:
    """{(host, profile): [(run_id, errors_total, wal_bytes, backup_age_hours, verdict), ...]} oldest first."""
    ids = [r[0] for r in conn.execute("SELECT DISTINCT run_id FROM audit_db WHERE run_id <= ? ORDER BY run_id DESC"
                                      " LIMIT ?", (upto_run, runs))]
    out: dict = {}
    if not ids:
        return out
    marks = ",".join("?" * len(ids))
    for rec in conn.execute(f"SELECT run_id, host, profile, errors_total, wal_bytes, backup_age_hours, verdict"
                            f" FROM audit_db WHERE run_id IN ({marks}) ORDER BY run_id", ids):
        out.setdefault((rec[1], rec[2]), []).append((rec[0], rec[3], rec[4], rec[5], rec[6]))
    return out


def _open_store(run: dict):
    """A connection to the store the run was read from (ResultsStore.get_run says how), else
    the runs.db in its results_dir, read-only."""
    if run.get("open_store"):
        return run["open_store"](readonly=True)
    from pathlib import Path
    from fleetops.engine.results import DB_NAME
    from fleetops.engine.results_backend import open_sqlite
    return open_sqlite(Path(run.get("results_dir") or "fleetops-runs") / DB_NAME, readonly=True)


def document(run: dict, audit: bool = True) -> dict | None:
    """`fleetops report --json --audit`: the stored rows of this run, trends, and the repairs and
    rollbacks run since the oldest audit in the trends; for a repair run, its own outcomes.
    None when there is neither."""
    from fleetops.hermes.repair_history import load_repairs

    if not audit:
        return None
    conn = _open_store(run)
    try:
        rows = load_rows(conn, run["id"]) if _table_exists(conn) else []
        if not rows:
            repairs = load_repairs(conn, run["id"], since=run["id"])
            return {"repairs": repairs} if repairs else None
        trends = load_trends(conn, run["id"])
        oldest = min((x[0] for v in trends.values() for x in v), default=run["id"])
        repairs = load_repairs(conn, run["id"], since=oldest)
        pers = persistence_trends(conn, sorted({x[0] for v in trends.values() for x in v}))
    finally:
        conn.close()
    return {"databases": rows, "healthy": all_healthy(rows),
            "trends": [{"host": h, "profile": p, "runs": [dict(zip(("run_id", "errors_total", "wal_bytes",
                                                                   "backup_age_hours", "verdict"), x),
                                                               **_persistence_point(pers, h, p, x[0]))
                                                          for x in v]}
                       for (h, p), v in sorted(trends.items())],
            "repairs": repairs}


def _persistence_point(pers: dict, host, profile, run_id) -> dict:
    p = (pers.get((host, profile)) or {}).get(run_id)
    keys = ("persisting", "write_errors", "write_errors_last_hour", "fallback_files")
    return dict(zip(keys, p)) if p else dict.fromkeys(keys)


def _persisting_point(r: dict) -> str:
    if r.get("persisting") is None:
        return "-"
    return f"{r['persisting']} ({r.get('write_errors') or 0})"


def _series(values, fmt) -> str:
    return " → ".join(fmt(v) for v in values)


def _runs_of(values) -> str:
    """Consecutive repeats folded: "healthy x3 → fts_index_damage x2 → healthy"."""
    out = []
    for v in values:
        if out and out[-1][0] == v:
            out[-1][1] += 1
        else:
            out.append([v, 1])
    return " → ".join(f"{v} x{n}" if n > 1 else str(v) for v, n in out)


def _trend_col(header: str, key: str, fmt, short: str | None = None, wide_only: bool = False) -> Col:
    """Every run's figure when wide; the first and the newest when narrow."""
    def narrow(tr):
        vals = [r[key] for r in tr["runs"]]
        return fmt(vals[0]) if len(vals) < 2 else f"{fmt(vals[0])} → {fmt(vals[-1])}"
    return Col(header, lambda tr: _series([r[key] for r in tr["runs"]], fmt), short=short, narrow=narrow,
               wide_only=wide_only)


TREND_COLUMNS = [
    Col("host", lambda tr: escape(str(tr["host"])), ident=True),
    Col("profile", lambda tr: escape(str(tr["profile"])), ident=True),
    Col("runs", lambda tr: str(len(tr["runs"])), justify="right"),
    Col("verdict", lambda tr: escape(_runs_of([r["verdict"] for r in tr["runs"]])), prose=True),
    Col("persisting (write errors)", lambda tr: escape(_series(tr["runs"], _persisting_point)), wide_only=True),
    _trend_col("errors", "errors_total", lambda v: "-" if v is None else str(v)),
    _trend_col("WAL MB", "wal_bytes", lambda v: "-" if v is None else f"{v / 1048576:.1f}", wide_only=True),
    _trend_col("backup age h", "backup_age_hours", lambda v: "none" if v is None else f"{v:.0f}", wide_only=True),
]


def render(run: dict, console, audit: bool = True) -> None:
    """`fleetops report --audit`: the fleet as this run saw it, then trends over the last runs."""
    if not audit:
        return
    from fleetops.hermes.repair_history import repairs_table

    doc = document(run, audit=True)
    if doc is None:
        console.print("[dim]no Hermes audit figures or repair outcomes recorded in this run[/]")
        return
    if "databases" not in doc:
        console.print(repairs_table(doc["repairs"], title=f"repairs and rollbacks, run {run['id']}"))
        return
    print_fleet(doc["databases"], console, title=f"Hermes state.db audit, run {run['id']}")
    t = FittedTable(TREND_COLUMNS, doc["trends"], title="trends (oldest → newest)")
    console.print(t)
    if doc["repairs"]:
        console.print(repairs_table(doc["repairs"], title="repairs and rollbacks in that time (oldest first)"))


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
