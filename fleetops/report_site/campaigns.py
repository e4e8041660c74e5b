"""A campaign on the site: the runs of all its shards (a restarted shard's too) as one entry.

The entry has a run's fields with the campaign id as its id and `members`, the run ids oldest
first, which data.run_detail and data.host_history read together, the newest run of a host
winning, as `fleetops report --campaign` does.
"""
from __future__ import annotations

from fleetops.engine.campaign_read import STATUS_ORDER
from fleetops.engine.recap import COUNTERS


def fold(reader, runs: list[dict]) -> list[dict]:
    """`runs` (newest first) with each campaign's member runs replaced by one campaign entry."""
    if not reader.has_table("campaign_runs"):
        return runs
    members: dict = {}
    for campaign, run_id, shard in reader.execute("SELECT campaign_id, run_id, shard FROM campaign_runs"
                                                  " ORDER BY started, run_id"):
        members.setdefault(campaign, []).append((run_id, shard))
    by_id = {r["id"]: r for r in runs}
    out = [r for r in runs if not any(r["id"] in {m for m, _s in ms} for ms in members.values())]
    for campaign, ms in members.items():
        parts = [by_id[m] for m, _s in ms if m in by_id]
        if not parts:
            continue
        latest = {s: by_id[m] for m, s in ms if m in by_id}           # each shard's newest run
        statuses = {r["status"] for r in latest.values()}
        entry = dict(parts[0], id=campaign, members=[r["id"] for r in parts], shards=len(latest),
                     started=min(r["started"] for r in parts),
                     status=next((s for s in STATUS_ORDER if s in statuses), "ok"),
                     exit_code=max(r["exit_code"] or 0 for r in latest.values()), status_note=None)
        ended = [r["ended"] for r in latest.values()]
        entry["ended"] = None if None in ended else max(ended)
        entry["duration"] = None if entry["ended"] is None else entry["ended"] - entry["started"]
        per_host = _host_counters(reader, entry["members"])
        entry["hosts"] = len(per_host)
        entry["counters"] = {k: sum(c[k] for c in per_host.values()) for k in COUNTERS}
        out.append(entry)
    out.sort(key=lambda r: (r["started"] or 0, r["id"]), reverse=True)
    return out


def _host_counters(reader, run_ids: list) -> dict:
    """host -> counters of its newest run among `run_ids` (oldest first)."""
    order = {r: i for i, r in enumerate(run_ids)}
    rows = reader.execute(f"SELECT run_id, host, {', '.join(COUNTERS)} FROM run_hosts"
                          f" WHERE run_id IN ({','.join('?' * len(run_ids))})", run_ids)
    return {rec[1]: dict(zip(COUNTERS, (int(v or 0) for v in rec[2:])))
            for rec in sorted(rows, key=lambda rec: order[rec[0]])}
