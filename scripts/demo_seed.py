"""Seed the demo fleet (scripts/demo.sh): Hermes stores, some damaged, under live Hermes holders.

    python3 scripts/demo_seed.py --lab fleetops-demo/lab --registry fleetops-demo/holders.json
    python3 scripts/demo_seed.py --lab fleetops-demo/lab --registry fleetops-demo/holders.json --down

Hosts (a realistic 40-session state.db built with the real hermes_state.SessionDB, damaged
byte-wise by the test corpus' cases):
  lab01  healthy                               live gateway
  lab02  healthy                               live gateway
  lab03  FTS index pages overwritten           live gateway + respawning desktop backend
  lab04  one session stored twice (title idx)  live gateway + a writer appending messages
  lab05  interior page zeroed                  live gateway
  lab06  garbage leaf pages                    no holder (Hermes not running there)
Every process is started as the host's own user and recorded in the registry; --down stops
exactly those PIDs (and whatever holds a seeded state.db now: a gateway the repair restarted).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

PLAN = [
    ("lab01", "healthy", ("gateway",)),
    ("lab02", "healthy", ("gateway",)),
    ("lab03", "fts_pages_overwritten", ("gateway", "desktop")),
    ("lab04", "session_duplicated_behind_title_index", ("gateway", "writer")),
    ("lab05", "interior_page_zeroed", ("gateway",)),
    ("lab06", "garbage_leaf_pages", ()),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", default="fleetops-demo/lab", help="the lab state directory (fleetops lab up --dir)")
    ap.add_argument("--prefix", default="fodemo")
    ap.add_argument("--registry", default="fleetops-demo/holders.json")
    ap.add_argument("--down", action="store_true", help="stop every recorded holder, by PID")
    opts = ap.parse_args()

    from fleetops.lab.lab import Lab
    from tests.support.seed import Seeder, find_venv

    lab = Lab(opts.lab, prefix=opts.prefix)
    seeder = Seeder(lab, opts.registry, venv=find_venv())
    if opts.down:
        pids = seeder.stop_all()
        print(f"demo: stopped {len(pids)} holder process(es) by PID")
        return 0
    if seeder.venv is None:
        print("demo_seed: no hermes-agent venv the lab users can run (FLEETOPS_LAB_HERMES_VENV)", file=sys.stderr)
        return 1
    seeder.stop_all()  # a previous demo's holders, if any (idempotent)
    from tests.corpus import build, damage
    work = tempfile.mkdtemp(prefix="fleetops-demo-seed-")
    src = os.path.join(work, "src", "state.db")
    build.standard_db(src)
    for name, case, holders in PLAN:
        seeder.wipe(name)
        d = damage.make(case, src, os.path.join(work, name, "state.db"))
        h = seeder.seed_image(name, d.path)
        started = []
        if "gateway" in holders:
            started.append(f"gateway {seeder.gateway(name)}")
        if "desktop" in holders:
            started.append(f"desktop backend {seeder.desktop(name, respawns=2, delay=1.0)} (respawns twice)")
        if "writer" in holders:
            seeder.writer(name, require_commit=False)
            started.append("writer (hermes chat)")
        print(f"demo: {name} ({h['user']}): {case:<40} {', '.join(started) or 'no Hermes process'}", flush=True)
    import shutil
    shutil.rmtree(work, ignore_errors=True)
    print(f"demo: holders recorded in {opts.registry}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
