"""Benchmark: playbooks/repair.yml across 20 lab hosts holding damaged realistic state.db files.

Each host (its own Unix user, a real sshd) gets a realistic Hermes store built with the real
hermes_state.SessionDB, damaged by one of several corpus cases in turn, and a real
`hermes gateway run` holding it. The repair play then runs rolling (canary, 10%, 25% batches);
figures come from the run's own JSON: total wall time, time per batch, and per step the
median / max / sum of the per-host durations. Afterwards every host is checked with
integrity_check and the gateways are stopped by PID. Prints figures, never asserts a time.

    python3 bench/repair.py [--hosts 20] [--sessions 100] [--keep-lab]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

from bench._common import lab as make_lab, median  # noqa: E402

CASES = ["fts_pages_overwritten", "garbage_leaf_pages", "session_duplicated_behind_title_index",
         "interior_page_zeroed", "unique_index_emptied"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--sessions", type=int, default=100, help="sessions per realistic database")
    ap.add_argument("--lab-dir", default="/var/tmp/fleetops-bench-lab")
    ap.add_argument("--keep-lab", action="store_true", help="leave the lab's sshd servers running")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    opts = ap.parse_args()

    from tests.corpus import build, damage
    from tests.support.seed import Seeder, find_venv

    venv = find_venv()
    if venv is None:
        print("no hermes-agent venv the lab users can run: PYTHON=/usr/bin/python3 "
              "FLEETOPS_HERMES_VENV=/opt/fleetops-test/hermes-venv-shared sh scripts/hermes-venv.sh", file=sys.stderr)
        return 1
    work = tempfile.mkdtemp(prefix="fleetops-bench-repair-")
    from fleetops.lab.lab import Lab
    try:
        was_up = any(r["alive"] for r in Lab(opts.lab_dir, prefix="fobench").status())
    except Exception:  # noqa: BLE001 - no lab there yet
        was_up = False
    lab = make_lab(opts.hosts, opts.lab_dir, prefix="fobench")
    names = [f"lab{i:02d}" for i in range(1, opts.hosts + 1)]
    seeder = Seeder(lab, os.path.join(work, "registry.json"), venv=venv)
    figures = {}
    try:
        src = os.path.join(work, "src", "state.db")
        t0 = time.perf_counter()
        meta = build.realistic_db(src, sessions=opts.sessions, messages_per_session=(60, 150), seed=11, deleted=6)
        size = os.path.getsize(src)
        print(f"source: {opts.sessions} sessions, {meta.get('messages', '?')} messages, {size / 1048576:.1f} MB "
              f"(built/cached in {time.perf_counter() - t0:.1f}s)", flush=True)
        cases = {}
        t0 = time.perf_counter()
        for i, name in enumerate(names):
            seeder.wipe(name)
            case = CASES[i % len(CASES)]
            d = damage.make(case, src, os.path.join(work, name, "state.db"))
            seeder.seed_image(name, d.path)
            cases[name] = d
        for name in names:
            seeder.gateway(name)             # a live gateway on every host: stop_writers has work to do
        print(f"seeded {len(names)} hosts with damaged stores and live gateways in "
              f"{time.perf_counter() - t0:.1f}s", flush=True)

        results = os.path.join(work, "runs")
        cmd = [sys.executable, "-m", "fleetops", "run", os.path.join(ROOT, "playbooks", "repair.yml"),
               "-i", lab.inventory_path, "-l", ",".join(names), "--results", results, "--json",
               "-e", f"hermes_bin={seeder.hermes}"]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        doc = json.loads(p.stdout) if p.stdout.strip() else None
        if doc is None:
            print(p.stderr[-3000:], file=sys.stderr)
            return 1
        play = doc["plays"][0]
        print(f"\nrepair play: exit {p.returncode}, {len(names)} hosts, batches "
              f"{[len(b) for b in play['batches']]}, wall {wall:.1f}s"
              + (f", stopped: {play['stopped_reason']}" if play.get("stopped_reason") else ""))

        # per step: per-host durations of the hosts that ran it
        rows = []
        for t in play["tasks"]:
            ds = [r["duration"] for r in t["results"].values() if r["status"] not in ("skipped",)
                  and r.get("duration") is not None]
            if not ds:
                continue
            rows.append((t["name"], len(ds), median(ds), max(ds), sum(ds)))
        w = max(len(r[0]) for r in rows)
        print(f"\n{'step':<{w}}  hosts  median s    max s    sum s")
        for name, n, med, mx, tot in rows:
            print(f"{name:<{w}}  {n:>5}  {med:>8.2f} {mx:>8.2f} {tot:>8.1f}")
        # per batch: first start to last end of its hosts' results
        by_host = {}
        for t in play["tasks"]:
            for h, r in t["results"].items():
                if r.get("started") and r.get("ended"):
                    lo, hi = by_host.get(h, (r["started"], r["ended"]))
                    by_host[h] = (min(lo, r["started"]), max(hi, r["ended"]))
        print("\nbatch  hosts  seconds")
        batches = []
        for i, b in enumerate(play["batches"]):
            spans = [by_host[h] for h in b if h in by_host]
            secs = (max(s[1] for s in spans) - min(s[0] for s in spans)) if spans else 0.0
            batches.append(round(secs, 2))
            print(f"{i + 1:>5}  {len(b):>5}  {secs:>7.1f}")

        # outcome per host, and the stores themselves
        outcome = {}
        for t in play["tasks"]:
            for h, r in t["results"].items():
                if t["name"].startswith("outcome:") and r["status"] in ("changed", "ok", "failed"):
                    outcome[h] = (r["result"].get("msg") or "").split(":", 1)[0]
        ok = 0
        for name in names:
            c = sqlite3.connect(f"file:{seeder.host(name)['db']}?mode=ro", uri=True)
            try:
                ok += c.execute("PRAGMA integrity_check(1)").fetchone()[0] == "ok"
            finally:
                c.close()
        counts = {}
        for v in outcome.values():
            counts[v] = counts.get(v, 0) + 1
        print(f"\noutcomes: {counts}; integrity_check ok on {ok}/{len(names)} stores afterwards; "
              f"cases: {', '.join(CASES)}")
        figures = {"hosts": len(names), "sessions": opts.sessions, "db_mb": round(size / 1048576, 1),
                   "exit": p.returncode, "wall_s": round(wall, 2), "batches_s": batches,
                   "steps": [{"step": r[0], "hosts": r[1], "median_s": round(r[2], 3), "max_s": round(r[3], 3),
                              "sum_s": round(r[4], 2)} for r in rows],
                   "outcomes": counts, "integrity_ok": ok}
        if opts.json:
            with open(opts.json, "w") as f:
                json.dump(figures, f, indent=1)
    finally:
        seeder.stop_all()
        for name in names:
            try:
                seeder.wipe(name)
            except OSError:
                pass
        if not opts.keep_lab and not was_up:  # a lab that was already up is someone else's to stop
            lab.down()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
