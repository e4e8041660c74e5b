#!/usr/bin/env python3
"""Fleet overhead: one tiny task on N lab hosts, fleetops vs ansible-core vs pyinfra.

Same hosts, same known_hosts (strict checking for all three), the same parallelism
(--forks, default one per host) for all three, ansible-core with pipelining on; each tool
runs --repeats times, interleaved and in a rotating order so machine noise and cold caches
hit all three alike. Prints the versions compared, then medians of wall clock, controller CPU
(the tool's own process tree) and host-side CPU per host (machine CPU less the controller's:
the lab's sshd and the host processes), and the ratios. Never asserts a time.

    python3 bench/fleet_overhead.py [--hosts 50] [--forks N] [--repeats 3] [--keep-lab]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (ROOT, ansible_env, ensure_bench_venv, fleetops_env, lab as make_lab, measured, median,  # noqa: E402
                     print_versions, rotated)

PY_CMD = "import sqlite3; print(sqlite3.sqlite_version)"


def write_alternative_inventories(lab, workdir: str) -> tuple:
    """An ansible INI inventory and a pyinfra inventory.py for the same lab hosts."""
    info = json.load(open(lab.json_path))
    hosts = info["hosts"]
    ini = os.path.join(workdir, "ansible.ini")
    with open(ini, "w") as f:
        f.write("[lab]\n")
        for h in hosts:
            f.write(f"{h['name']} ansible_host=127.0.0.1 ansible_port={h['port']} ansible_user={h['user']} "
                    f"ansible_ssh_private_key_file={lab.key_path}\n")
    pyi = os.path.join(workdir, "pyinfra_inventory.py")
    with open(pyi, "w") as f:
        f.write("lab = [\n")
        for h in hosts:
            data = {"ssh_hostname": "127.0.0.1", "ssh_port": h["port"], "ssh_user": h["user"],
                    "ssh_key": lab.key_path, "ssh_known_hosts_file": lab.known_hosts_path,
                    "ssh_strict_host_key_checking": "yes"}
            f.write(f"    ({h['name']!r}, {data!r}),\n")
        f.write("]\n")
    return ini, pyi


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--forks", type=int, default=None, help="parallelism of every tool (default: --hosts)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep-lab", action="store_true")
    ap.add_argument("--lab-dir", default="/var/tmp/fleetops-bench-lab")
    opts = ap.parse_args()

    venv = ensure_bench_venv()
    print_versions(venv)
    lab = make_lab(opts.hosts, opts.lab_dir, prefix="fobench")
    work = tempfile.mkdtemp(prefix="fleetops-bench-")
    ini, pyi = write_alternative_inventories(lab, work)
    forks = str(opts.forks or opts.hosts)
    fo_env = fleetops_env()
    tools = {
        "fleetops": ([sys.executable, "-m", "fleetops", "run",
                      os.path.join(ROOT, "bench", "playbooks", "sqlite_version.yml"), "-i", lab.inventory_path,
                      "--forks", forks, "--json", "--results", os.path.join(work, "runs")],
                     lambda: fo_env, lambda r: r["rc"] == 0 and json.loads(r["out"])["status"] == "ok"),
        "ansible-core": ([os.path.join(venv, "bin", "ansible"), "all", "-i", ini, "-m", "command",
                          "-a", f"python3 -c '{PY_CMD}'", "-f", forks, "-o"],
                         lambda: ansible_env(lab, work), lambda r: r["rc"] == 0),
        "pyinfra": ([os.path.join(venv, "bin", "pyinfra"), pyi, "exec", "--parallel", forks, "-y", "--",
                     "python3", "-c", f"'{PY_CMD}'"], lambda: None, lambda r: r["rc"] == 0),
    }
    runs = {k: [] for k in tools}
    try:
        for rep in range(opts.repeats):
            order = rotated(list(tools), rep)
            for name in order:
                cmd, env, ok = tools[name]
                r = measured(cmd, env=env(), cwd=work)
                if ok(r):
                    runs[name].append(r)
                else:
                    print(f"{name} failed (rc {r['rc']}): {(r['out'] + r['err'])[-500:]}")
            print(f"repeat {rep + 1} ({' → '.join(order)}): "
                  + ", ".join(f"{k} {v[-1]['wall']:.2f}s" for k, v in runs.items() if v))
    finally:
        if not opts.keep_lab:
            lab.down()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{opts.hosts} hosts, forks {forks} for every tool, {opts.repeats} repeats in rotating order "
          f"(medians; ansible-core with pipelining):")
    med = {}
    for k, rs in runs.items():
        med[k] = median([r["wall"] for r in rs])
        ctl = median([r["controller_cpu"] for r in rs])
        host_ms = 1000 * median([r["host_cpu"] for r in rs]) / opts.hosts
        walls = ", ".join(f"{r['wall']:.2f}" for r in rs)
        print(f"  {k:13s} {med[k]:7.2f}s wall   controller CPU {ctl:5.2f}s   host side (sshd + host "
              f"processes) {host_ms:5.1f} ms CPU per host   runs: {walls}")
    f = med["fleetops"]
    print(f"  ansible-core / fleetops = {med['ansible-core'] / f:.1f}x")
    print(f"  pyinfra / fleetops      = {med['pyinfra'] / f:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
