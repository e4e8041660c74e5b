#!/usr/bin/env python3
"""Audit benchmark: `fleetops audit` on N lab hosts, each holding a healthy realistic
state.db, beside the same checks run through ansible-core's `script` module.

The ansible probe is the very same audit payload (fleetops/remote/hermes/audit.py and
what it imports), embedded in one self-contained Python script, so both tools run
identical checks on identical files; only the transport and orchestration differ.
Same hosts, same known_hosts (strict), the same parallelism for both (--forks, default one
per host; `fleetops audit --forks`), ansible-core with pipelining on (the `script` module
copies its file either way), repeats interleaved in a rotating order. Prints the versions
compared, medians and the ratio, and the audit payload's own timings per host (the holder
scan's among them); never asserts a time.

It also measures the floor: the same probe run directly on every host (as its user, no
SSH, as many at once as this machine has cores). On a lab the simulated hosts share the
controller's cores, so no orchestrator can finish faster than that floor; the bench
prints each tool's wall clock and machine CPU beside it, so the ratio can be read for
what it is.

    python3 bench/audit.py [--hosts 50] [--forks N] [--repeats 3] [--keep-lab]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (ROOT, ansible_env, ensure_bench_venv, fleetops_env, lab as make_lab, machine_cpu,  # noqa: E402
                     measured, median, print_versions, rotated)
from fleet_overhead import write_alternative_inventories  # noqa: E402

sys.path.insert(0, ROOT)


def standalone_probe(path: str) -> None:
    """One Python file that runs the audit payload exactly as fleetops ships it, minus SSH stdin."""
    from fleetops.engine.payload import BOOTSTRAP, bundle_sources, encode_input

    line = encode_input(bundle_sources("hermes_audit"), "fleetops.remote.hermes.audit", {}).strip()
    code = BOOTSTRAP.replace("@MARKER@", repr("--fleetops-bench--")).replace(
        "sys.stdin.buffer.readline()", repr(line))
    with open(path, "w") as f:
        f.write("#!/usr/bin/env python3\n" + code)


def seed(lab, db: str) -> None:
    """A copy of the healthy realistic db in every lab user's ~/.hermes, owned by them, 0600."""
    for h in json.load(open(lab.json_path))["hosts"]:
        pw = pwd.getpwnam(h["user"])
        home = os.path.join(pw.pw_dir, ".hermes")
        os.makedirs(home, exist_ok=True)
        dest = os.path.join(home, "state.db")
        shutil.copyfile(db, dest)
        for p in (home, dest):
            os.chown(p, pw.pw_uid, pw.pw_gid)
        os.chmod(home, 0o700)
        os.chmod(dest, 0o600)


def host_floor(lab, probe: str) -> tuple:
    """(wall, machine CPU) of the probe run straight on every host as its user, no SSH, with
    this machine's cores busy: the least time any orchestrator can take on this lab."""
    users = [h["user"] for h in json.load(open(lab.json_path))["hosts"]]

    def one(user):
        pw = pwd.getpwnam(user)
        env = {"HOME": pw.pw_dir, "PATH": "/usr/bin:/bin", "USER": user, "LOGNAME": user}
        p = subprocess.run(["setpriv", "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid),
                            "--init-groups", "/usr/bin/python3", "-I", "-S", probe],
                           env=env, cwd=pw.pw_dir, capture_output=True, text=True)
        return p.returncode == 0 and '"verdict": "healthy"' in p.stdout

    c0, t0 = machine_cpu(), time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        ok = list(pool.map(one, users))
    wall, cpu = time.perf_counter() - t0, machine_cpu() - c0
    if not all(ok):
        print(f"note: the direct probe did not report healthy on {ok.count(False)} host(s)")
    return wall, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--forks", type=int, default=None, help="parallelism of both tools (default: --hosts)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep-lab", action="store_true")
    ap.add_argument("--lab-dir", default="/var/tmp/fleetops-bench-lab")
    opts = ap.parse_args()

    venv = ensure_bench_venv()
    print_versions(venv)
    from tests.corpus.build import standard_db

    work = tempfile.mkdtemp(prefix="fleetops-bench-audit-")
    db = os.path.join(work, "state.db")
    standard_db(db)
    size = os.path.getsize(db)
    audit_seconds = []
    lab = make_lab(opts.hosts, opts.lab_dir, prefix="fobench")
    seed(lab, db)
    ini, _ = write_alternative_inventories(lab, work)
    probe = os.path.join(work, "audit_probe.py")
    standalone_probe(probe)
    os.chmod(work, 0o755)
    os.chmod(probe, 0o644)
    forks = str(opts.forks or opts.hosts)
    fo_cmd = [sys.executable, "-m", "fleetops", "audit", "-i", lab.inventory_path, "--json", "--forks", forks,
              "--results", os.path.join(work, "runs")]
    an_cmd = [os.path.join(venv, "bin", "ansible"), "all", "-i", ini, "-m", "script",
              "-a", f"{probe} executable=python3", "-f", forks, "-o"]
    fo_env = fleetops_env()
    times = {"fleetops": [], "ansible-core": [], "floor": []}
    cpu = {k: [] for k in times}
    ctl = {k: [] for k in times}
    holders_seconds = []

    def run_fleetops():
        r = measured(fo_cmd, env=fo_env, cwd=work)
        if r["rc"] != 0:
            print(f"fleetops audit rc {r['rc']}: {r['err'][-400:]}")
            return None
        for res in json.loads(r["out"])["hosts"].values():
            audit_seconds.append(res.get("payload_seconds", 0))
            for d in res.get("databases") or ():
                t = d.get("holders_seconds")
                if t is not None:
                    holders_seconds.append(t)
        return r

    def run_ansible():
        r = measured(an_cmd, env=ansible_env(lab, work), cwd=work)
        if r["rc"] != 0:
            print(f"ansible rc {r['rc']}: {(r['out'] + r['err'])[-400:]}")
            return None
        healthy = r["out"].count('\\"verdict\\": \\"healthy\\"') + r["out"].count('"verdict": "healthy"')
        if healthy < opts.hosts:
            print("note: ansible output did not show every host healthy")
        return r

    def run_floor():
        t, c = host_floor(lab, probe)
        return {"wall": t, "machine_cpu": c, "controller_cpu": 0.0}

    runners = {"floor": run_floor, "fleetops": run_fleetops, "ansible-core": run_ansible}
    try:
        for rep in range(opts.repeats):
            order = rotated(list(runners), rep)
            for name in order:
                r = runners[name]()
                if r is not None:
                    times[name].append(r["wall"])
                    cpu[name].append(r["machine_cpu"])
                    ctl[name].append(r["controller_cpu"])
            print(f"repeat {rep + 1} ({' → '.join(order)}): "
                  + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items() if v))
    finally:
        if not opts.keep_lab:
            lab.down()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: median(v) for k, v in times.items()}
    print(f"\naudit of {opts.hosts} hosts, each a healthy {size / 1e6:.0f} MB state.db "
          f"(forks {forks} for both tools, {opts.repeats} repeats in rotating order, ansible-core with "
          f"pipelining, median wall clock):")
    if audit_seconds:
        print(f"  host-side audit payload per host: median {median(audit_seconds):.2f}s "
              f"(sum {sum(audit_seconds) / max(1, len(times['fleetops'])):.1f}s per run, all on this machine's cores)")
    if holders_seconds:
        print(f"  holder scan (in that payload) per database: median {1000 * median(holders_seconds):.1f} ms")
    names = {"floor": "floor (probe run directly on each host, no SSH, no orchestrator)"}
    for k, v in med.items():
        print(f"  {k:13s} {v:7.2f}s   machine CPU {median(cpu[k]):6.1f}s   controller CPU {median(ctl[k]):5.1f}s   "
              f"runs: {', '.join(f'{x:.2f}' for x in times[k])}   {names.get(k, '')}")
    print(f"  ansible-core / fleetops = {med['ansible-core'] / med['fleetops']:.1f}x")
    print(f"  above the floor: fleetops {med['fleetops'] - med['floor']:.2f}s, "
          f"ansible-core {med['ansible-core'] - med['floor']:.2f}s "
          f"({(med['ansible-core'] - med['floor']) / max(1e-9, med['fleetops'] - med['floor']):.1f}x); "
          f"a tool costing nothing would be {med['ansible-core'] / med['floor']:.1f}x ansible-core here")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
