"""What the repair and rollback runs did, per host and profile, read back from runs.db.

Why: `fleetops report --audit` shows each database's verdict across audit runs; without the
repairs in between, "structural_corruption -> healthy" reads like it healed itself, and a
host that was refused or rolled back vanishes from view. Nothing extra is stored: the
Hermes modules' own task results (hermes_repair, hermes_swap, hermes_verify,
hermes_rollback) are read by module name, so renaming a playbook task changes nothing.
"""
from __future__ import annotations

import json

from rich.markup import escape
from fleetops.display import Col, FittedTable

STEP_MODULES = ("hermes_stop_writers", "hermes_quarantine", "hermes_repair", "hermes_swap", "hermes_verify",
                "hermes_rollback")
OUTCOME_STYLES = {"REPAIRED": "green", "ROLLED BACK": "bold yellow", "NOT SWAPPED": "dim",
                  "REFUSED": "yellow", "FAILED": "bold red", "UNREACHABLE": "red"}


def _items(result: dict) -> list:
    """A looped task's per-item results, or the result itself."""
    items = result.get("results")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else [result]


def _profile(item: dict):
    for key in ("profile", "r", "s"):
        v = item.get(key)
        if isinstance(v, str):
            return v
        if isinstance(v, dict) and isinstance(v.get("profile"), str):
            return v["profile"]
    return None


def _repair_runs(conn, since: str | None, upto: str) -> list:
    """Ids of the runs in [since, upto] that stopped, repaired, swapped or rolled back (not --check)."""
    marks = ",".join("?" * len(STEP_MODULES))
    ids = [r[0] for r in conn.execute(
        f"SELECT DISTINCT run_id FROM task_results WHERE module IN ({marks}) AND run_id <= ?"
        + (" AND run_id >= ?" if since else "") + " ORDER BY run_id",
        (*STEP_MODULES, upto, *((since,) if since else ())))]
    out = []
    for rid in ids:
        row = conn.execute("SELECT options FROM runs WHERE id=?", (rid,)).fetchone()
        try:
            opts = json.loads(row[0]) if row and row[0] else {}
        except ValueError:
            opts = {}
        if not (isinstance(opts, dict) and opts.get("check")):
            out.append(rid)
    return out


def _host_rows(run_id: str, host: str, rows: list) -> list:
    profiles: dict = {}
    failure = None
    unreachable = False
    for module, status, msg, raw in rows:
        try:
            result = json.loads(raw) if raw else {}
        except ValueError:
            result = {}
        if status == "unreachable":
            unreachable, failure = True, msg
        elif status == "failed":
            failure = msg  # the last one is the play's outcome line ("REFUSED at ...", "FAILED at ...")
        if module not in STEP_MODULES or not isinstance(result, dict):
            continue
        for item in _items(result):
            prof = _profile(item)
            if prof is None or item.get("skipped"):
                continue
            p = profiles.setdefault(prof, {"path": None, "verdict": None, "loss_rows": None, "swapped": False,
                                           "verified": None, "rolled_back": False, "touched": False})
            if module == "hermes_repair":
                p.update(path=item.get("path"), verdict=item.get("verdict"), loss_rows=item.get("loss_rows"),
                         touched=True)
            elif module == "hermes_swap" and item.get("swap") and item.get("changed"):
                p["swapped"] = p["touched"] = True
            elif module == "hermes_verify":
                p["verified"] = not item.get("failed")
            elif module == "hermes_rollback" and item.get("changed"):
                p["rolled_back"] = p["touched"] = True
            elif module in ("hermes_stop_writers", "hermes_quarantine") and item.get("changed"):
                p["touched"] = True
    word = (failure or "").split(" ", 1)[0]
    failed_as = "UNREACHABLE" if unreachable else (word if word in ("REFUSED", "FAILED") else "FAILED")
    out = []
    for prof, p in sorted(profiles.items()):
        if not p["touched"] and failure is None:
            continue  # looked at, healthy: untouched
        if p["rolled_back"]:
            outcome = "ROLLED BACK"
        elif p["swapped"] and p["verified"] and failure is None:
            outcome = "REPAIRED"
        elif failure is not None:
            outcome = failed_as
        elif p["path"] and not p["swapped"]:
            outcome = "NOT SWAPPED"
        else:
            outcome = "REPAIRED" if p["swapped"] else "NOT SWAPPED"
        out.append({"run_id": run_id, "host": host, "profile": prof, "outcome": outcome, "path": p["path"],
                    "verdict_before": p["verdict"], "loss_rows": p["loss_rows"],
                    "detail": failure if outcome in ("FAILED", "REFUSED", "UNREACHABLE", "ROLLED BACK") else None})
    if not out and failure is not None:
        out.append({"run_id": run_id, "host": host, "profile": None, "outcome": failed_as, "path": None,
                    "verdict_before": None, "loss_rows": None, "detail": failure})
    return out


def load_repairs(conn, upto: str, since: str | None = None) -> list[dict]:
    """Per run, host and profile that a repair or rollback touched (or refused/failed): oldest run first."""
    out = []
    for rid in _repair_runs(conn, since, upto):
        by_host: dict = {}
        for host, module, status, msg, raw in conn.execute(
                "SELECT host, module, status, msg, result FROM task_results WHERE run_id=?"
                " ORDER BY play_index, task_index, id", (rid,)):
            by_host.setdefault(host, []).append((module, status, msg, raw))
        for host in sorted(by_host):
            out.extend(_host_rows(rid, host, by_host[host]))
    return out


def _detail(r: dict) -> str:
    detail = r.get("detail") or ""
    return escape(detail if len(detail) <= 160 else detail[:157] + "...")


REPAIR_COLUMNS = [
    Col("run", lambda r: escape(r["run_id"]), ident=True),
    Col("host", lambda r: escape(str(r["host"])), ident=True),
    Col("profile", lambda r: escape(str(r["profile"] or "-")), ident=True),
    Col("outcome", lambda r: f"[{OUTCOME_STYLES.get(r['outcome'], 'bold')}]{escape(r['outcome'])}[/]"),
    Col("was", lambda r: escape(str(r["verdict_before"] or "-")), wide_only=True, detail=True),
    Col("path", lambda r: escape(str(r["path"] or "-")), wide_only=True, detail=True),
    Col("rows lost", lambda r: "-" if r["loss_rows"] is None else str(r["loss_rows"]), wide_only=True, detail=True),
    Col("detail", _detail, wide_only=True, detail=True, prose=True),
]


def repairs_table(rows: list[dict], title: str = "repairs and rollbacks") -> FittedTable:
    return FittedTable(REPAIR_COLUMNS, rows, title=title, key=lambda r: f"{r['host']} {r['profile'] or '-'}:")
