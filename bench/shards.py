#!/usr/bin/env python3
"""Shards: one playbook on N lab hosts from 1 controller, and as a campaign of 1, 2 and 4 shards
(processes started at once on this machine, one real PostgreSQL store), in the same run.

For each it prints the wall time until the last shard exits, the controllers' CPU (every shard's
process tree) and the ratios against the one plain controller, for a playbook without `serial`
and one with `serial: 10%` (ten fleet-wide batches, each a barrier every shard waits at). On one
machine the shards share its cores, so this measures what coordination costs, not what more
machines gain. After each, the per-host results read back from the store (`report`, or
`report --campaign`) are compared with the one controller's. Never asserts a time.

    python3 bench/shards.py [--hosts 1000] [--forks 50] [--repeats 1] [--keep-lab]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, children_cpu, fleetops_env, lab as make_lab, median, rotated  # noqa: E402
from scale import inventories  # noqa: E402

sys.path.insert(0, ROOT)
PLAY = "- hosts: all\n  gather_facts: false\n{serial}  tasks:\n    - python:\n        payload: sqlite_version\n"


def _run_at_once(cmds: list, env: dict, cwd: str) -> dict:
    c0, t0 = children_cpu(), time.perf_counter()
    procs = [subprocess.Popen(c, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    errs = [p.communicate()[1] for p in procs]
    return {"wall": time.perf_counter() - t0, "cpu": children_cpu() - c0, "rcs": [p.returncode for p in procs],
            "err": "".join(e[-400:] for e in errs)}


def _measure(pg, books: dict, configs: list, inv: str, opts, env: dict, work: str) -> dict:
    """(playbook, config) -> the measurements of each repeat that every shard finished with exit 0."""
    rows: dict = {}
    reference: dict = {}          # playbook -> the one controller's per-host results
    for rep in range(opts.repeats):
        for book in books:
            for config in rotated(configs, rep):
                base = [sys.executable, "-m", "fleetops", "run", books[book], "-i", inv, "--forks", str(opts.forks),
                        "--json", "--results", pg.new_db()]
                n = 1 if config == "1 controller" else int(config.split()[1])
                cmds = [base] if config == "1 controller" else [
                    base + ["--shard", f"{k}/{n}", "--campaign", f"bench-{rep}"] for k in range(n)]
                m = _run_at_once(cmds, env, work)
                print(f"{opts.hosts} hosts  {book:10s} {config:18s} {m['wall']:7.2f}s wall {m['cpu']:7.2f}s "
                      f"controllers' cpu" + (f"  FAILED: exit codes {m['rcs']}: {m['err']}" if any(m["rcs"]) else ""),
                      flush=True)
                if not any(m["rcs"]):
                    rows.setdefault((book, config), []).append(m)
                    got = _per_host(base[-1], None if config == "1 controller" else f"bench-{rep}", env, work)
                    same = "reference" if config == "1 controller" else \
                        "same as 1 controller" if got == reference.get(book) else "DIFFERENT from 1 controller"
                    if config == "1 controller":
                        reference[book] = got
                    print(f"    per-host results ({len(got)} hosts): {same}", flush=True)
    return rows


def _per_host(url: str, campaign: str | None, env: dict, work: str) -> dict:
    """host -> [(play, task, status)] from the store: the run, or the campaign read as one."""
    which = ["--campaign", campaign] if campaign else ["latest"]
    doc = json.loads(subprocess.run([sys.executable, "-m", "fleetops", "report", *which, "--results", url, "--json"],
                                    env=env, cwd=work, capture_output=True, text=True, check=True).stdout)
    out: dict = {}
    for play in doc["plays"]:
        for task in play["tasks"]:
            for host, r in task["results"].items():
                out.setdefault(host, []).append((play["index"], task["index"], r["status"]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--forks", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--keep-lab", action="store_true")
    ap.add_argument("--lab-dir", default="/var/tmp/fleetops-bench-scale-lab")
    opts = ap.parse_args()
    from tests.support.postgres import running_server

    lab = make_lab(opts.hosts, opts.lab_dir, prefix="foscale")
    work = tempfile.mkdtemp(prefix="fleetops-bench-shards-")
    env = fleetops_env()
    inv = inventories(lab, opts.hosts, work)["fleetops"]
    books = {}
    for name, serial in (("no serial", ""), ("serial 10%", "  serial: '10%'\n")):
        books[name] = os.path.join(work, f"{len(books)}.yml")
        with open(books[name], "w") as f:
            f.write(PLAY.format(serial=serial))
    configs = ["1 controller", "campaign 1 shard", "campaign 2 shards", "campaign 4 shards"]
    try:
        with running_server() as pg:
            rows = _measure(pg, books, configs, inv, opts, env, work)
    finally:
        if not opts.keep_lab:
            lab.down()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{opts.hosts} hosts, forks {opts.forks}, {opts.repeats} repeat(s), medians; ratios against 1 controller")
    for book in books:
        base = rows.get((book, "1 controller"))
        for config in configs:
            ms = rows.get((book, config))
            if not ms or not base:
                continue
            w, c = median([m["wall"] for m in ms]), median([m["cpu"] for m in ms])
            bw, bc = median([m["wall"] for m in base]), median([m["cpu"] for m in base])
            print(f"{book:10s} {config:18s} {w:7.2f}s wall ({w / bw:.2f}x) {c:7.2f}s cpu ({c / bc:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
