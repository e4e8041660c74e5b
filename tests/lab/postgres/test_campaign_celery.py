"""The shard contract on a real distributed engine: Celery workers (prefork pool) on a real
Redis broker run the 4 shards of a campaign as 4 tasks of examples/shards/celery_shards.py;
a pool process SIGKILLed mid-shard has its task redelivered with the same index, which
resumes the campaign. Every host runs once and the report shows the campaign whole."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from fleetops.engine.shards import owner

from tests.support.cli_run import cli_env, fleetops, write
from tests.support.paths import REPO
from tests.lab.postgres.test_campaign import MARK, _runs_on, _setup

pytestmark = pytest.mark.lab
EXAMPLE = REPO / "examples" / "shards"


def _children(pid: int) -> list:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d))
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_four_shards_as_celery_tasks_one_pool_process_killed(lab_clean, pg_url, redis_url, tmp_path):
    inv, pb, names = _setup(lab_clean, tmp_path, "")
    write(pb, "- hosts: all\n  gather_facts: false\n  serial: 2\n  tasks:\n" + MARK +
          "    - command: sleep 1\n")
    env = cli_env({"FLEETOPS_CELERY_BROKER": redis_url, "FLEETOPS_RESULTS": pg_url,
                   "PYTHONPATH": f"{EXAMPLE}{os.pathsep}{REPO}"})
    worker = subprocess.Popen([sys.executable, "-m", "celery", "-A", "celery_shards", "worker", "--concurrency", "5",
                               "--pool", "prefork", "--without-gossip", "--without-mingle", "--without-heartbeat",
                               "-Q", "fleetops", "--loglevel", "INFO"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=open(tmp_path / "worker.log", "w"))
    try:
        client = subprocess.Popen([sys.executable, str(EXAMPLE / "celery_shards.py"), pb, inv, "c-celery", "4"],
                                  cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline, killed = time.monotonic() + 180, None
        while killed is None and time.monotonic() < deadline and client.poll() is None:
            for pool_proc in _children(worker.pid):             # a pool process running shard 1
                if any("--shard 1/4" in _cmdline(c) for c in _children(pool_proc)) and \
                        sum(_runs_on(lab_clean, names).values()) >= 2:
                    os.kill(pool_proc, signal.SIGKILL)
                    killed = pool_proc
                    break
            time.sleep(0.2)
        out, err = client.communicate(timeout=600)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=30)
    log = (tmp_path / "worker.log").read_text()
    assert killed is not None, "no pool process ran shard 1 while the campaign was under way: " + log[-2000:]
    assert sorted(line.split(":")[0] for line in out.splitlines()) == [f"shard {k}/4" for k in range(4)], out
    with psycopg.connect(pg_url) as conn:
        status = dict(conn.execute("SELECT host, status FROM campaign_hosts WHERE campaign_id='c-celery'").fetchall())
    cut = sorted(h for h, st in status.items() if st == "interrupted")
    assert set(status) == set(names) and {st for h, st in status.items() if h not in cut} == {"ok"}, status
    assert all(owner(h, 4) == 1 for h in cut), cut                # only the killed shard's hosts in flight
    ran = _runs_on(lab_clean, names)
    assert {h for h in names if ran[h] != 1} <= set(cut) and max(ran.values()) == 1, ran    # none run twice
    assert client.returncode == (2 if cut else 0), out + err + log[-3000:]
    doc = json.loads(fleetops("report", "--campaign", "c-celery", "--results", pg_url, "--json", cwd=tmp_path).stdout)
    assert sorted(doc["stats"]) == sorted(names)
    shards_run = sorted(r["shard"] for r in doc["campaign"]["runs"])
    assert shards_run.count(1) == 2 and sorted(set(shards_run)) == [0, 1, 2, 3], shards_run   # shard 1 redelivered
