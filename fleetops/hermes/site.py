"""The Hermes views of `fleetops report --html`: fleet now, trends, repairs, and each host's audits.

Read from the audit figures (`audit_db`, written by `store_audit`) and the repair and rollback
runs' own task results (`repair_history.load_repairs`), through the site's results reader, so
the same code serves any store backend. The page code is `hermes_site.js` (package data).
"""
from __future__ import annotations

import json

from fleetops.hermes.audit import severity, sort_rows
from fleetops.hermes.audit_system import load_system
from fleetops.hermes.repair_history import load_repairs
from fleetops.report_site.build import safe_name
from fleetops.report_site.data import host_groups

_COLS = ("run_id", "host", "profile", "db_path", "verdict", "errors_total", "errors_by_object", "holders",
         "holders_status", "backup_age_hours", "wal_bytes", "db_bytes", "warnings", "reasons", "conditions")


def _decode(text, empty):
    try:
        v = json.loads(text) if text else empty
    except ValueError:
        return empty
    return v if isinstance(v, type(empty)) else empty


def _audit_rows(reader, run_ids: set) -> list[dict]:
    if not reader.has_table("audit_db"):
        return []
    out = []
    for rec in reader.execute(f"SELECT {', '.join(_COLS)} FROM audit_db"):
        if rec[0] in run_ids:
            out.append(dict(zip(_COLS, rec)))
    return out


def _persistence(reader, run_ids: set) -> dict:
    """{(run_id, host, profile): (persisting, write_errors)} where the audit recorded it."""
    if not reader.has_table("audit_persistence"):
        return {}
    return {(rec[0], rec[1], rec[2]): (rec[3], rec[4]) for rec in reader.execute(
        "SELECT run_id, host, profile, persisting, write_errors FROM audit_persistence") if rec[0] in run_ids}


def _systems(reader, run_ids: set) -> dict:
    """{(run_id, host): system} where the audit recorded what the host is."""
    if not reader.has_table("audit_system"):
        return {}
    return {k: v for k, v in load_system(reader).items() if k[0] in run_ids}


def _fleet_now(rows: list[dict], started: dict, groups: dict, persistence: dict | None = None,
               systems: dict | None = None) -> list[dict]:
    """Per host, the rows of the newest audit run that covered it, worst first."""
    newest: dict = {}
    for r in rows:
        if r["host"] not in newest or started[r["run_id"]] > started[newest[r["host"]]]:
            newest[r["host"]] = r["run_id"]
    out = []
    for r in rows:
        if newest[r["host"]] != r["run_id"]:
            continue
        out.append({"host": r["host"], "profile": r["profile"], "db": r["db_path"], "verdict": r["verdict"],
                    "errors_total": r["errors_total"],
                    "errors_by_object": _decode(r["errors_by_object"], {}), "holders": r["holders"],
                    "holders_status": r["holders_status"], "backup_age_hours": r["backup_age_hours"],
                    "wal_bytes": r["wal_bytes"], "db_bytes": r["db_bytes"],
                    "warnings": _decode(r["warnings"], []), "reasons": _decode(r["reasons"], [])[:4],
                    "conditions": _decode(r["conditions"], []), "run_id": r["run_id"],
                    "run_key": safe_name(r["run_id"]), "host_key": safe_name(r["host"]),
                    "groups": groups.get(r["host"], []),
                    "system": (systems or {}).get((r["run_id"], r["host"])),
                    "persisting": (persistence or {}).get((r["run_id"], r["host"], r["profile"]), (None, None))[0],
                    "write_errors": (persistence or {}).get((r["run_id"], r["host"], r["profile"]), (None, None))[1]})
    return sort_rows(out)


def _tally(rows, key: str) -> dict:
    counts: dict = {}
    for r in rows:
        counts[r[key]] = counts.get(r[key], 0) + 1
    return counts


def _counts(rows) -> dict:
    """Databases per verdict, worst verdict first."""
    return dict(sorted(_tally(rows, "verdict").items(), key=lambda kv: (-severity(kv[0]), kv[0])))


def _per_run(rows: list[dict], audit_runs: list[dict]) -> list[dict]:
    by_run: dict = {r["id"]: {"run_id": r["id"], "started": r["started"], "counts": {}, "errors": 0,
                              "wal_bytes": 0, "databases": 0} for r in audit_runs}
    for r in rows:
        a = by_run[r["run_id"]]
        a["counts"][r["verdict"]] = a["counts"].get(r["verdict"], 0) + 1
        a["errors"] += r["errors_total"] or 0
        a["wal_bytes"] += r["wal_bytes"] or 0
        a["databases"] += 1
    return sorted(by_run.values(), key=lambda a: a["started"] or 0)


def contribute(site) -> None:
    """Add the Fleet now (index), Trends and Repairs pages, and the audit history of each host."""
    runs = {r["id"]: r for r in site.runs}
    started = {rid: r["started"] or 0 for rid, r in runs.items()}
    rows = _audit_rows(site.reader, set(runs))
    groups = host_groups(site.runs)
    systems = _systems(site.reader, set(runs))
    fleet = _fleet_now(rows, started, groups, _persistence(site.reader, set(runs)), systems)
    audit_run_ids = {r["run_id"] for r in rows}
    audit_runs = [r for r in site.runs if r["id"] in audit_run_ids]

    repairs = []
    if runs and site.reader.has_table("task_results"):
        upto = max(runs)
        for rep in load_repairs(site.reader, upto, since=min(runs)):
            if rep["run_id"] not in runs:
                continue
            rep["started"] = started[rep["run_id"]]
            rep["run_key"] = safe_name(rep["run_id"])
            rep["host_key"] = safe_name(rep["host"])
            rep["playbook"] = runs[rep["run_id"]]["playbook"]
            under = f"hermes/{rep['profile']}" if rep.get("profile") else ""
            rep["evidence"] = site.evidence(rep["run_id"], rep["host"], under)
            repairs.append(rep)
    repairs.sort(key=lambda r: (-(r["started"] or 0), str(r["host"]), str(r["profile"])))

    site.add_script("fleetops.hermes", "hermes_site.js")
    site.add_page("index", "Fleet now", {
        "rows": fleet, "counts": _counts(fleet), "audit_runs": len(audit_runs),
        "newest": audit_runs[0]["id"] if audit_runs else None,
        "groups": sorted({g for r in fleet for g in r["groups"]}),
        "hosts": len({r["host"] for r in fleet})})
    marks: dict = {}
    for rep in repairs:
        m = marks.setdefault(rep["run_id"], {"run_id": rep["run_id"], "started": rep["started"], "outcomes": {}})
        m["outcomes"][rep["outcome"]] = m["outcomes"].get(rep["outcome"], 0) + 1
    worst = fleet[0]["host"] if fleet else None
    site.add_page("trends", "Trends", {
        "runs": _per_run(rows, audit_runs), "marks": sorted(marks.values(), key=lambda m: m["started"] or 0),
        "hosts": sorted({(r["host"], safe_name(r["host"])) for r in rows}), "default_host": worst,
        "verdicts": sorted({r["verdict"] for r in rows}, key=lambda v: (-severity(v), v))})
    site.add_page("repairs", "Repairs", {"repairs": repairs, "counts": _tally(repairs, "outcome")})

    history: dict = {}
    for r in rows:
        history.setdefault(r["host"], []).append(
            [r["run_id"], started[r["run_id"]], r["profile"], r["verdict"], r["errors_total"], r["wal_bytes"],
             r["backup_age_hours"], systems.get((r["run_id"], r["host"]))])
    for host, hist in history.items():
        hist.sort(key=lambda x: (x[1], x[2]))
        site.host_section(host, "audits", hist)
    for rep in repairs:
        site.host_extras.setdefault(rep["host"], {}).setdefault("repairs", []).append(rep)
    for r in fleet:
        s = site.host_summary.setdefault(r["host"], {"verdict": r["verdict"], "profiles": 0,
                                                     "groups": r["groups"]})
        s["profiles"] += 1
        if severity(r["verdict"]) > severity(s["verdict"]):
            s["verdict"] = r["verdict"]

