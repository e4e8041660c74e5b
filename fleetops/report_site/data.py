"""What the site shows about runs and hosts, read from the results store (no Hermes knowledge).

Each query reads whole tables once (runs, run_hosts, task_results per run) rather than one
query per host or task, so 1,000 hosts x 100 runs stays a few seconds of reading. Task
results' JSON is passed through as stored text (already masked and scrubbed when it was
recorded) instead of being decoded and encoded again.
"""
from __future__ import annotations

import statistics

from fleetops.engine.recap import COUNTERS
from fleetops.engine.results import run_row
from fleetops.engine.results_read import dict_rows

HOST_SHARD = 100          # hosts per results file of a run page: one file loaded per host looked at
HOSTS_PER_STATUS = 200    # host names kept per task and status ("failed on 3: a, b, c"); counts stay exact


def runs(reader, since: float | None = None) -> list[dict]:
    """Every run (newest first) with its summed recap counters and host count."""
    where, params = ("WHERE started >= ?", (since,)) if since is not None else ("", ())
    out = []
    for r in dict_rows(reader, f"SELECT * FROM runs {where} ORDER BY started DESC, id DESC", params):
        r = run_row(r)
        out.append({"id": r["id"], "started": r["started"], "ended": r["ended"], "duration": r["duration"],
                    "status": r["status"], "status_note": r["status_note"], "exit_code": r["exit_code"],
                    "playbook": r["playbook"], "inventory": r["inventory"], "user": r["controller_user"],
                    "controller": r["controller_host"], "check": bool((r["options"] or {}).get("check")),
                    "hosts": 0, "counters": {k: 0 for k in COUNTERS}})
    by_id = {r["id"]: r for r in out}
    sums = ", ".join(f"SUM({k})" for k in COUNTERS)
    for rec in reader.execute(f"SELECT run_id, COUNT(*), {sums} FROM run_hosts GROUP BY run_id"):
        r = by_id.get(rec[0])
        if r is not None:
            r["hosts"] = rec[1]
            r["counters"] = {k: int(v or 0) for k, v in zip(COUNTERS, rec[2:])}
    return out


def host_history(reader, run_ids: set, members: dict | None = None) -> dict:
    """{host: [{run_id, counters}, ...]} over the given runs; `members` (run id -> campaign id)
    lists a campaign's runs under the campaign, once per host (its newest run there)."""
    cols = ", ".join(COUNTERS)
    members = members or {}
    out: dict = {}
    for rec in sorted(reader.execute(f"SELECT run_id, host, {cols} FROM run_hosts"),
                      key=lambda r: (members.get(r[0], r[0]), r[0])):
        rid = members.get(rec[0], rec[0])
        if rid in run_ids:
            rows = out.setdefault(rec[1], [])
            if rows and rows[-1]["run_id"] == rid:
                rows.pop()
            rows.append({"run_id": rid, "counters": dict(zip(COUNTERS, rec[2:]))})
    return out


def host_status(counters: dict) -> str:
    """One word for a host's run: the worst counter it has."""
    for k in ("unreachable", "failed", "rescued", "ignored", "changed"):
        if counters.get(k):
            return k
    if counters.get("ok"):
        return "ok"
    return "skipped" if counters.get("skipped") else "not_run"   # in the play, but it stopped first


def _durations(values: list) -> dict:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"min": None, "median": None, "max": None}
    return {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}


def run_detail(reader, run: dict) -> tuple[dict, dict]:
    """(the run page's data, {shard index: [(host, [[play, task, status, duration, raw result JSON]])]})."""
    rids = run.get("members") or [run["id"]]            # a campaign's runs, oldest first (campaigns.py)
    among = f"run_id IN ({','.join('?' * len(rids))})"
    plays: dict = {}
    for p in dict_rows(reader, f"SELECT play_index, name, hosts, started, ended, stopped_reason FROM plays"
                               f" WHERE {among}", rids):
        play = plays.setdefault(p["play_index"], {"index": p["play_index"], "name": p["name"], "hosts": p["hosts"],
                                                  "started": p["started"], "ended": p["ended"],
                                                  "stopped_reason": None, "tasks": {}})
        play["stopped_reason"] = play["stopped_reason"] or p["stopped_reason"]
        if len(rids) > 1:
            play["hosts"] = None
    hosts = {}
    cols = ", ".join(COUNTERS)
    order = {r: i for i, r in enumerate(rids)}
    rows = sorted(reader.execute(f"SELECT run_id, host, {cols} FROM run_hosts WHERE {among}", rids),
                  key=lambda rec: order[rec[0]])
    for rec in rows:                                    # the newest run of a host wins
        hosts[rec[1]] = dict(zip(COUNTERS, rec[2:]))
    newest: dict = {}
    for rec in reader.execute(f"SELECT run_id, host, play_index, task_index, task_name, module, status, duration,"
                              f" result FROM task_results WHERE {among} ORDER BY play_index, task_index, id", rids):
        key = (rec[1], rec[2], rec[3])
        if key not in newest or order[rec[0]] >= order[newest[key][0]]:
            newest[key] = rec
    per_host: dict = {}
    durations: dict = {}
    for _rid, host, pi, ti, name, module, status, duration, raw in sorted(newest.values(),
                                                                          key=lambda r: (r[2], r[3])):
        play = plays.setdefault(pi, {"index": pi, "name": None, "hosts": None, "started": None, "ended": None,
                                     "stopped_reason": None, "tasks": {}})
        task = play["tasks"].setdefault(ti, {"index": ti, "name": name, "module": module, "counts": {},
                                             "hosts": {}})
        task["counts"][status] = task["counts"].get(status, 0) + 1
        names = task["hosts"].setdefault(status, [])
        if len(names) < HOSTS_PER_STATUS:
            names.append(host)
        durations.setdefault((pi, ti), []).append(duration)
        per_host.setdefault(host, []).append((pi, ti, status, duration, raw or "{}"))
        hosts.setdefault(host, {k: 0 for k in COUNTERS})
    out_plays = []
    for pi in sorted(plays):
        p = plays[pi]
        tasks = []
        for ti in sorted(p["tasks"]):
            t = p["tasks"][ti]
            t["duration"] = _durations(durations.get((pi, ti), []))
            tasks.append(t)
        p["tasks"] = tasks
        p["host_count"] = len(_json_list(p["hosts"])) if p["hosts"] else None
        p.pop("hosts")
        out_plays.append(p)
    names = sorted(hosts)
    shards: dict = {}
    host_rows = []
    for i, h in enumerate(names):
        shard = i // HOST_SHARD
        host_rows.append([h, shard, hosts[h], host_status(hosts[h])])
        shards.setdefault(shard, []).append((h, per_host.get(h, [])))
    return {"run": run, "plays": out_plays, "hosts": host_rows}, shards


def _json_list(text) -> list:
    import json
    try:
        v = json.loads(text)
    except (TypeError, ValueError):
        return []
    return v if isinstance(v, list) else []


def host_groups(runs_newest_first: list[dict]) -> dict:
    """{host: [group, ...]} from the runs' inventory files that are still there (newest run first wins).

    The store keeps the inventory's path, not its groups; an inventory that moved or no longer
    parses simply contributes nothing (the site then has no group filter for those hosts).
    """
    from fleetops.engine.inventory import load_inventory

    out: dict = {}
    seen = set()
    for run in runs_newest_first:
        path = run.get("inventory")
        if not path or path in seen:
            continue
        seen.add(path)
        try:
            inv = load_inventory(path)
            groups = inv.groups_map()
        except Exception:    # noqa: BLE001 - a broken or moved inventory only loses the group filter
            continue
        for group, members in groups.items():
            if group in ("all", "ungrouped"):
                continue
            for host in members:
                out.setdefault(host, set()).add(group)
    return {h: sorted(g) for h, g in out.items()}
