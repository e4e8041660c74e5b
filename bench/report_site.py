"""`fleetops report --html` on a synthetic store of 1,000 hosts x 100 runs: generation and page load.

The store is written through fleetops' own schema (ResultsStore) and audit storage (store_audit);
each host's audit result is a real `hermes_audit` payload result, measured on real corpus stores
(a healthy one built by the real hermes-agent, and byte-level damaged copies), varied per host and
run; every tenth run is a repair run over the damaged hosts, with the repair modules' result shapes.
Page load is measured in real headless Chromium (Debian's package) over the DevTools protocol:
from navigation until the page's table or charts are in the DOM.

Alternatives run side by side: generation against `fleetops report --json --audit` of the newest
run (the one other way to get the figures out of the store), and a Fleet-now page that renders
every row at once (page size = all) against the paged one.

    .venv/bin/python bench/report_site.py [--hosts 1000] [--runs 100] [--keep DIR]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from fleetops.engine.results import COUNTERS, ResultsStore  # noqa: E402
from fleetops.hermes.audit import store_audit  # noqa: E402

CASES = ("healthy", "fts_pages_overwritten", "unique_index_emptied", "garbage_leaf_pages")
AUDIT_TASKS = (("check the hermes user and home", "assert"), ("audit every profile's state.db", "hermes_audit"),
               ("fail when a database is not healthy", "assert"))


def audit_templates(work: str) -> dict:
    """{case: the real hermes_audit payload result on that corpus store}."""
    from fleetops.remote.hermes import audit as hermes_audit
    from tests.corpus import build, damage

    src = os.path.join(work, "std", "state.db")
    os.makedirs(os.path.dirname(src))
    build.standard_db(src)
    out = {}
    for case in CASES:
        d = damage.make(case, src, os.path.join(work, case, "state.db"))
        res = hermes_audit.main({"db_path": str(d.path), "holders": False, "services": False})
        assert not res.get("failed"), res.get("msg")
        out[case] = res
    return out


def _verdict_plan(hosts: int, runs: int, rng: random.Random) -> list:
    """Per run, per host, a corpus case: a few hosts break each run; repairs every 10th run fix most."""
    state = ["healthy"] * hosts
    plan = []
    for i in range(runs):
        if i % 10 == 9:
            plan.append(("repair", list(state)))
            state = [s if s == "healthy" or rng.random() < 0.1 else "healthy" for s in state]
            continue
        for _ in range(max(1, hosts // 200)):
            state[rng.randrange(hosts)] = rng.choice(CASES[1:])
        plan.append(("audit", list(state)))
    return plan


def make_store(results_dir: str, hosts: int, runs: int, templates: dict, seed: int = 20) -> dict:
    """Write the synthetic store; returns {"runs", "hosts", "task_results", "seconds"}."""
    t0 = time.perf_counter()
    rng = random.Random(seed)
    names = [f"hermes-{i:04d}.fleet.example" for i in range(hosts)]
    store = ResultsStore(results_dir)
    start = time.time() - runs * 3600
    n_tasks = 0
    for i, (kind, state) in enumerate(_verdict_plan(hosts, runs, rng)):
        t = start + i * 3600
        rid = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(t)) + f"-{i:06x}"   # sortable by time, as new_run_id
        playbook = f"fleetops/playbooks/{kind}.yml"
        task_rows, host_rows, audits = [], [], {}
        for hi, host in enumerate(names):
            damaged = state[hi] != "healthy"
            counters = dict.fromkeys(COUNTERS, 0)
            if kind == "audit":
                res = copy.deepcopy(templates[state[hi]])
                for d in res["databases"]:
                    d["profile"] = "default"   # measured with db_path alone, which has no profile name
                    # a fleet in service: a WAL of some size, and a verified backup of some age
                    files = d["files"] = d.get("files") or {}
                    files["wal"] = dict(files.get("wal") or {}, size=rng.randrange(0, 96 << 20))
                    d["backups"] = dict(d.get("backups") or {}, newest_verified={"age_hours": rng.uniform(0, 60)})
                    d["warnings"] = [w for w in d.get("warnings") or [] if w.get("code") != "no_verified_backup"]
                audits[host] = res
                steps = [("ok", {"msg": "All assertions passed"}), ("ok", res),
                         ("failed" if damaged else "ok", {"failed": damaged, "msg": res["msg"]})]
            else:
                if not damaged:
                    steps = [("ok", {"msg": "healthy: untouched"})]
                else:
                    item = {"profile": "default", "path": "salvage",
                            "verdict": templates[state[hi]]["databases"][0]["verdict"],
                            "loss_rows": rng.randrange(0, 40), "changed": True}
                    steps = [("changed", {"changed": True, "results": [item]}),
                             ("changed", {"changed": True, "results": [{"profile": "default", "swap": True,
                                                                         "changed": True}]}),
                             ("ok", {"results": [{"profile": "default"}]})]
            for ti, (status, result) in enumerate(steps):
                module = AUDIT_TASKS[ti][1] if kind == "audit" else ("hermes_repair", "hermes_swap",
                                                                       "hermes_verify")[ti]
                name = AUDIT_TASKS[ti][0] if kind == "audit" else module.replace("_", " ")
                dur = rng.uniform(0.05, 2.5)
                task_rows.append((rid, host, 0, ti, name, module, status, result.get("msg"), t + ti, t + ti + dur,
                                  dur, json.dumps(result)))
                counters["ok" if status != "failed" else "failed"] += 1
                if status == "changed":
                    counters["changed"] += 1
            host_rows.append((rid, host, *counters.values(), t, t + 10))
        n_tasks += len(task_rows)
        status = "failed" if any(r[6] == "failed" for r in task_rows) else "ok"
        with store.connect() as c:
            c.execute("INSERT INTO runs(id, started, ended, status, exit_code, playbook, inventory, options,"
                      " controller_user, controller_host, controller_pid, fleetops_version)"
                      " VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                      (rid, t, t + rng.uniform(60, 900), status, 0 if status == "ok" else 2, playbook,
                       "inventories/fleet.yml", "{}", "ops", "controller-1", 4242, "0.1.0"))
            c.executemany(f"INSERT INTO run_hosts(run_id, host, {', '.join(COUNTERS)}, first_seen, last_seen)"
                          f" VALUES (?,?,{','.join('?' * len(COUNTERS))},?,?)", host_rows)
            c.executemany("INSERT INTO task_results(run_id, host, play_index, task_index, task_name, module, status,"
                          " msg, started, ended, duration, result) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", task_rows)
            c.execute("INSERT INTO plays(run_id, play_index, name, hosts, started, ended) VALUES (?,?,?,?,?,?)",
                      (rid, 0, kind, json.dumps(names), t, t + 600))
        if audits:
            store_audit(store, rid, audits)
    store.close()
    return {"runs": runs, "hosts": hosts, "task_results": n_tasks, "seconds": time.perf_counter() - t0}


def _cli(*args) -> tuple:
    env = dict(os.environ, PYTHONPATH=ROOT, COLUMNS="200")
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "fleetops", *args], capture_output=True, text=True, env=env)
    return time.perf_counter() - t0, p


def page_loads(site: str, rounds: int = 3) -> dict:
    """Median ms from navigation until the page has drawn its rows/charts, per page, in headless Chromium."""
    from tests.support.chromium import Chromium

    first_run = json.loads(open(os.path.join(site, "data", "page", "runs.js")).read().split(", ", 1)[1]
                           .rstrip(");\n"))["runs"][0]["id"]
    host = "hermes-0000.fleet.example"
    pages = {"fleet now": ("index.html", "table.grid tbody tr"), "trends": ("trends.html", "#host-charts .uplot"),
             "repairs": ("repairs.html", "table.grid tbody tr"), "runs": ("runs.html", "table.grid tbody tr"),
             "run": (f"run.html#{first_run}", "table.tasks tbody tr"),
             "host": (f"host.html#{host}", "table.grid tbody tr")}
    out = {}
    with Chromium(tempfile.mkdtemp(prefix="fo-bench-chrome-")) as browser:
        for label, (page, sel) in pages.items():
            times = []
            for _ in range(rounds):
                times.append(browser.load_time(os.path.join(site, page), sel))
            out[label] = sorted(times)[len(times) // 2]
            assert not browser.errors, browser.errors
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--keep", metavar="DIR", help="keep the store and site in DIR")
    a = ap.parse_args()
    work = a.keep or tempfile.mkdtemp(prefix="fo-bench-site-")
    os.makedirs(work, exist_ok=True)
    try:
        results, site = os.path.join(work, "runs"), os.path.join(work, "site")
        if not os.path.exists(os.path.join(results, "runs.db")):
            templates = audit_templates(os.path.join(work, "corpus"))
            made = make_store(results, a.hosts, a.runs, templates)
            print(f"store: {a.hosts} hosts x {a.runs} runs, {made['task_results']} task results,"
                  f" {os.path.getsize(os.path.join(results, 'runs.db')) / 1048576:.0f} MB, written in"
                  f" {made['seconds']:.1f} s")
        gen, p = _cli("report", "--html", site, "--results", results)
        assert p.returncode == 0, p.stderr
        print(f"generate: {gen:.1f} s  ({p.stdout.strip()})")
        with open(os.path.join(site, "data", "page", "runs.js")) as f:
            runs = json.loads(f.read().split(", ", 1)[1].rstrip(");\n"))["runs"]
        newest_audit = next(r["id"] for r in runs if r["playbook"].endswith("audit.yml"))
        js, p = _cli("report", newest_audit, "--json", "--audit", "--results", results)
        assert p.returncode == 0 and json.loads(p.stdout)["audit"]["databases"], p.stderr
        print(f"alternative, report --json --audit of the newest audit run only: {js:.1f} s"
              f" ({len(p.stdout) / 1048576:.1f} MB)  -> the whole site costs {gen / js:.1f}x one run's JSON")
        sizes = {name: os.path.getsize(os.path.join(site, "data", "page", name + ".js")) / 1048576
                 for name in ("index", "trends", "repairs", "runs", "hosts")}
        print("page data: " + ", ".join(f"{k} {v:.2f} MB" for k, v in sizes.items()))
        loads = page_loads(site)
        print("page load (median of 3, ms, navigation to rows drawn): "
              + ", ".join(f"{k} {v:.0f}" for k, v in loads.items()))
        allrows = os.path.join(site, "index-all.html")
        with open(os.path.join(site, "index.html")) as f:
            text = f.read()
        with open(allrows, "w") as f:
            f.write(text.replace("<script>Site.start(", "<script>Site.PAGE_SIZE = 1e9; Site.start("))
        paged = loads["fleet now"]
        from tests.support.chromium import Chromium
        with Chromium(tempfile.mkdtemp(prefix="fo-bench-chrome-")) as browser:
            whole = sorted(browser.load_time(allrows, "table.grid tbody tr") for _ in range(3))[1]
        print(f"alternative, Fleet now with every row in the DOM: {whole:.0f} ms -> paged is {whole / paged:.1f}x faster")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
