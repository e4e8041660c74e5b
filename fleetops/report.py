"""`fleetops report`: render a run from the central results store, on the terminal or as JSON.

Reads only what the store recorded, so a report of an interrupted run (even one
whose controller was SIGKILLed) shows exactly what had landed before it stopped.
"""
from __future__ import annotations

import datetime as _dt
import os

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from fleetops.display import RUN_STYLES, STYLES, Col, FittedTable, excerpt, recap_table
from fleetops.engine.recap import COUNTERS


def _when(ts) -> str:
    if not ts:
        return "-"
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def status_label(run: dict) -> str:
    """"ok", or "interrupted (no end recorded)" for a run whose controller died."""
    return run["status"] + (f" ({run['status_note']})" if run.get("status_note") else "")


def run_stats(run: dict) -> dict:
    """Recap counters per host, from run_hosts (the executor's final figures when it got that far)."""
    return {h["host"]: {k: h.get(k, 0) for k in COUNTERS} for h in run.get("hosts", [])}


def _tasks_by_play(run: dict) -> dict:
    """play_index -> ordered list of (task_index, name, module, {host: task_result})."""
    out: dict[int, dict] = {}
    for t in run.get("tasks", []):
        tasks = out.setdefault(t["play_index"], {})
        key = t["task_index"]
        entry = tasks.setdefault(key, {"index": key, "name": t["task_name"], "module": t["module"], "results": {}})
        entry["results"][t["host"]] = t
    return {p: [tasks[k] for k in sorted(tasks)] for p, tasks in out.items()}


def document(run: dict) -> dict:
    """The same shape as `fleetops run --json`, plus the report-only fields."""
    by_play = _tasks_by_play(run)
    plays = []
    play_indexes = [p["play_index"] for p in run.get("plays", [])]
    for idx in sorted(set(play_indexes) | set(by_play)):
        p = next((p for p in run.get("plays", []) if p["play_index"] == idx), {})
        plays.append({
            "index": idx, "name": p.get("name"), "hosts": p.get("hosts", []), "batches": p.get("batches", []),
            "stopped_reason": p.get("stopped_reason"), "started": p.get("started"), "ended": p.get("ended"),
            "tasks": [{"index": t["index"], "name": t["name"], "module": t["module"],
                       "results": {h: {"status": r["status"], "started": r["started"], "ended": r["ended"],
                                       "duration": r["duration"], "result": r["result"]}
                                   for h, r in t["results"].items()}}
                      for t in by_play.get(idx, [])],
        })
    doc = {
        "run_id": run["id"], "status": run["status"], "status_note": run.get("status_note"),
        "recorded_status": run.get("recorded_status"), "exit_code": run.get("exit_code"),
        "playbook": run.get("playbook"), "inventory": run.get("inventory"), "options": run.get("options"),
        "started": run.get("started"), "ended": run.get("ended"),
        "controller": {"user": run.get("controller_user"), "host": run.get("controller_host"),
                       "pid": run.get("controller_pid")},
        "fleetops_version": run.get("fleetops_version"), "results_dir": run.get("results_dir"),
        "plays": plays, "stats": run_stats(run),
        "facts": {h["host"]: h.get("facts") or {} for h in run.get("hosts", []) if h.get("facts")},
    }
    return doc


TASK_COLUMNS = [
    Col("#", lambda r: r["index"], justify="right"),
    Col("task", lambda r: escape(r["task"]), prose=True),
    Col("host", lambda r: escape(r["host"]), ident=True),
    Col("status", lambda r: Text(r["status"], style=STYLES.get(r["status"], ""))),
    Col("time", lambda r: f"{r['duration']:.2f}s" if r.get("duration") is not None else "-", justify="right"),
    Col("msg", lambda r: escape(r["msg"]), wide_only=True, detail=True, prose=True),
]


def render(run: dict, console: Console, extras=()) -> None:
    """Header, plays with a task x host table each, recap, each of `extras(run, console)`, status."""
    style = RUN_STYLES.get(run["status"], "bold")
    console.print(f"[bold]run {escape(run['id'])}[/]  [{style}]{escape(status_label(run))}[/]"
                  + (f"  exit {run['exit_code']}" if run.get("exit_code") is not None else ""))
    dur = f"{run['duration']:.1f}s" if run.get("duration") is not None else "-"
    console.print(f"playbook {escape(str(run.get('playbook')))} · inventory {escape(str(run.get('inventory')))}")
    console.print(f"started {_when(run.get('started'))} · ended {_when(run.get('ended'))} · {dur}"
                  f" · {escape(str(run.get('controller_user')))}@{escape(str(run.get('controller_host')))}"
                  f" pid {run.get('controller_pid')} · fleetops {escape(str(run.get('fleetops_version')))}")
    opts = run.get("options") or {}
    flags = [k for k in ("check", "diff") if opts.get(k)]
    if flags:
        console.print(f"[yellow]{', '.join(flags)} mode[/]")

    doc = document(run)
    for play in doc["plays"]:
        console.print(Text(""))
        batches = play["batches"]
        console.print(f"[bold blue]PLAY[/] [bold]{escape(str(play['name']))}[/] [dim]({len(play['hosts'])} host(s)"
                      + (f", {len(batches)} batches" if len(batches) > 1 else "") + ")[/]")
        if play.get("stopped_reason"):
            console.print(f"[bold red]stopped:[/] {escape(str(play['stopped_reason']))}")
        if not play["tasks"]:
            console.print("[dim]no task results recorded[/]")
            continue
        rows = []
        for task in play["tasks"]:
            first = True
            for host in sorted(task["results"]):
                r = task["results"][host]
                st = r["status"]
                msg = excerpt((r.get("result") or {}).get("msg"), 100) if st not in ("ok", "skipped") else ""
                rows.append({"index": str(task["index"]) if first else "",
                             "task": f"{task['name']} ({task['module']})" if first else "", "host": host,
                             "status": st, "duration": r.get("duration"), "msg": msg})
                first = False
        table = FittedTable(TASK_COLUMNS, rows, key=lambda row: f"{row['host']}:",
                            detail_when=lambda row: bool(row["msg"]))
        console.print(table)
    console.print(Text(""))
    console.print(recap_table(doc["stats"]))
    for extra in extras:
        extra(run, console)
    console.print(f"[{style}]{escape(status_label(run))}[/] · results in "
                  f"{escape(str(run.get('db_path') or run.get('results_dir')))}")


def _when_short(ts) -> str:
    return "-" if not ts else _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%m-%d %H:%M")


LIST_COLUMNS = [
    Col("run id", lambda r: escape(r["id"]), ident=True),
    Col("started", lambda r: _when(r["started"]), narrow=lambda r: _when_short(r["started"]), ident=True),
    Col("status", lambda r: Text(status_label(r), style=RUN_STYLES.get(r["status"], "")),
        narrow=lambda r: Text(r["status"], style=RUN_STYLES.get(r["status"], ""))),
    Col("exit", lambda r: "" if r.get("exit_code") is None else str(r["exit_code"]), justify="right"),
    Col("playbook", lambda r: escape(str(r.get("playbook"))),
        narrow=lambda r: escape(os.path.basename(str(r.get("playbook")))), prose=True),
]


def render_list(runs: list, console: Console) -> None:
    """`fleetops report --list`: recent runs, newest first."""
    console.print(FittedTable(LIST_COLUMNS, runs, title="runs"))
