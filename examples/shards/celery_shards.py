"""The shards of a fleetops campaign as Celery tasks, one task per shard index.

Start workers on as many controllers as you like (each with FLEETOPS_RESULTS set to the
campaign's PostgreSQL store, so its password never travels through the broker):

    FLEETOPS_CELERY_BROKER=redis://queue:6379/0 FLEETOPS_RESULTS=postgresql://... \
        celery -A celery_shards worker --concurrency 2 -Q fleetops

then start a campaign of N shards from anywhere:

    python celery_shards.py repair.yml inventory.ini 2026-12-03-repair 4

A shard is `fleetops run ... --shard K/N --campaign ID`: Celery only decides where it runs.
With acks_late and reject_on_worker_lost, a shard whose worker dies is handed to another
worker with the same index, and the campaign resumes it (hosts done are skipped; the
shard's advisory lock keeps a second copy from running while the first lives).
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys

from celery import Celery, group

BROKER = os.environ.get("FLEETOPS_CELERY_BROKER", "redis://127.0.0.1:6379/0")
app = Celery("fleetops_shards", broker=BROKER, backend=BROKER)
app.conf.update(task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
                task_default_queue="fleetops", result_expires=7 * 86400,
                broker_transport_options={"visibility_timeout": 12 * 3600})   # longer than a rollout


def _die_with_parent() -> None:
    """The fleetops process ends when its worker process does (Linux), so a redelivered shard
    never meets an orphan of itself still holding the shard's lock."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)     # PR_SET_PDEATHSIG


@app.task(name="fleetops.shard")
def shard(index: int, count: int, campaign: str, playbook: str, inventory: str, extra: list | None = None) -> dict:
    """Run shard index/count of the campaign; its exit code, run id and hosts."""
    cmd = [sys.executable, "-m", "fleetops", "run", playbook, "-i", inventory, "--shard", f"{index}/{count}",
           "--campaign", campaign, "--json", *(extra or [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=_die_with_parent)
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return {"shard": index, "exit_code": proc.returncode, "run_id": doc.get("run_id"),
            "hosts": sorted(doc.get("stats", {})), "stderr": proc.stderr[-2000:]}


def start(playbook: str, inventory: str, campaign: str, count: int, extra: list | None = None):
    """Queue the campaign's shards; the GroupResult's .get() waits for all of them."""
    return group(shard.s(k, count, campaign, playbook, inventory, list(extra or [])) for k in range(count)).apply_async()


if __name__ == "__main__":
    pb, inv, campaign_id, n = sys.argv[1:5]
    results = start(pb, inv, campaign_id, int(n), sys.argv[5:]).get()
    for r in results:
        print(f"shard {r['shard']}/{n}: exit {r['exit_code']}, {len(r['hosts'])} hosts, run {r['run_id']}")
    sys.exit(max(r["exit_code"] for r in results))
