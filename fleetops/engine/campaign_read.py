"""A campaign read back as one run: the runs of every shard (a restarted shard's too) merged.

The result has the shape of ResultsStore.get_run, so `fleetops report` renders it and its
--json document as it does a run: each host's counters come from the newest run that ran it,
each task result of a host likewise, plays and batches are the fleet's (the shards' parts of
one batch index joined), and the first stop reason recorded is the play's.
"""
from __future__ import annotations

import json

STATUS_ORDER = ("running", "interrupted", "failed", "unreachable", "ok")   # the first present is the campaign's


def campaign_runs(store, campaign_id: str) -> tuple[list[dict], dict]:
    """([{run_id, shard, started}] oldest first, {stopped_reason, shards, batches}); no runs for an unknown id."""
    with store.connect() as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name='campaign_runs'").fetchone() is None:
            return [], {}
        rows = conn.execute("SELECT run_id, shard, started FROM campaign_runs WHERE campaign_id=?"
                            " ORDER BY started, run_id", (campaign_id,)).fetchall()
        stop = conn.execute("SELECT stopped_reason, shards FROM campaigns WHERE id=?", (campaign_id,)).fetchone()
        batch_rows = []
        if rows:
            marks = ",".join("?" * len(rows))
            batch_rows = conn.execute(f"SELECT run_id, play_index, batch_index, hosts FROM batches WHERE run_id IN"
                                      f" ({marks})", tuple(r[0] for r in rows)).fetchall()
    meta = {"stopped_reason": stop[0] if stop else None, "shards": stop[1] if stop else None,
                           "batches": [tuple(b) for b in batch_rows]}
    return [{"run_id": r[0], "shard": r[1], "started": r[2]} for r in rows], meta


def merged_run(store, campaign_id: str) -> dict | None:
    """The campaign as one run dict (ResultsStore.get_run's shape), or None when unknown."""
    members, meta = campaign_runs(store, campaign_id)
    runs = [r for r in (store.get_run(m["run_id"]) for m in members) if r is not None]
    if not runs:
        return None
    latest_per_shard: dict = {}
    for m, run in zip(members, runs):
        latest_per_shard[m["shard"]] = run
    statuses = {r["status"] for r in latest_per_shard.values()}
    status = next((s for s in STATUS_ORDER if s in statuses), "ok")
    if meta["stopped_reason"] and status == "ok":
        status = "failed"
    hosts: dict = {}
    tasks: dict = {}
    for run in runs:                                   # oldest first: a newer run's row wins
        for h in run["hosts"]:
            hosts[h["host"]] = h
        for t in run["tasks"]:
            tasks[(t["play_index"], t["task_index"], t["host"])] = t
    merged = dict(runs[0])
    merged.update({
        "id": campaign_id, "status": status, "status_note": None, "recorded_status": status,
        "exit_code": max((r.get("exit_code") or 0) for r in latest_per_shard.values()),
        "started": min(r["started"] for r in runs),
        "ended": None if any(r.get("ended") is None for r in runs) else max(r["ended"] for r in runs),
        "hosts": [hosts[h] for h in sorted(hosts)],
        "tasks": sorted(tasks.values(), key=lambda t: (t["play_index"], t["task_index"], t["host"])),
        "plays": _plays(runs, meta["batches"]),
        "campaign": {"id": campaign_id, "shards": meta["shards"], "stopped_reason": meta["stopped_reason"],
                     "runs": [{**m, "status": r["status"]} for m, r in zip(members, runs)]},
    })
    if merged["started"] is not None and merged["ended"] is not None:
        merged["duration"] = merged["ended"] - merged["started"]
    return merged


def _plays(runs: list, batch_rows: list) -> list:
    plays: dict = {}
    for run in runs:
        for p in run["plays"]:
            play = plays.setdefault(p["play_index"], {**p, "hosts": [], "batches": [], "stopped_reason": None})
            play["hosts"] += [h for h in p["hosts"] if h not in play["hosts"]]
            play["stopped_reason"] = play["stopped_reason"] or p.get("stopped_reason")
            play["started"] = min(x for x in (play.get("started"), p.get("started")) if x is not None) \
                if p.get("started") or play.get("started") else None
    per_batch: dict = {}
    for _run_id, play_index, batch_index, hosts_json in batch_rows:
        part = per_batch.setdefault((play_index, batch_index), [])
        part += [h for h in (json.loads(hosts_json) if hosts_json else []) if h not in part]
    for (play_index, _b), hosts in sorted(per_batch.items()):
        if play_index in plays:
            plays[play_index]["batches"].append(sorted(hosts))
    for play in plays.values():
        play["hosts"] = sorted(play["hosts"])
    return [plays[i] for i in sorted(plays)]
