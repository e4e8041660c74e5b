#!/usr/bin/env python3
"""Reading and listing a fleet-sized INI inventory: fleetops against ansible-inventory.

Every command reads the inventory first, so its cost is paid by each run, each audit and each
`hosts` listing. The inventory is generated (a seeded shape, the same every run): N hosts in 20
groups, half the groups under a `children` group with its own vars, `[all:vars]`, and per-host
variables as a fleet has them (an address, a user, a profile, a rack). Each tool lists every host
with its variables as JSON (`fleetops hosts -i INV --json`, `ansible-inventory -i INV --list`),
cold processes, side by side, `--repeats` times; the figures are wall time and the peak resident
memory of the process (wait4's ru_maxrss), medians, and their ratio.

    python3 bench/inventory_size.py --hosts 50000 --repeats 3
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ensure_bench_venv, print_versions  # noqa: E402


def write_inventory(path: str, hosts: int, groups: int = 20) -> None:
    names = [f"region{g:02d}" for g in range(groups)]
    with open(path, "w") as f:
        for g, group in enumerate(names):
            f.write(f"[{group}]\n")
            for i in range(g, hosts, groups):
                f.write(f"host{i:05d}.example.net ansible_host=10.{i // 65536}.{i // 256 % 256}.{i % 256} "
                        f"ansible_user=hermes hermes_profile=p{i % 7} rack={i % 40}\n")
            f.write("\n")
        f.write("[emea:children]\n" + "".join(f"{n}\n" for n in names[:groups // 2]))
        f.write("\n[emea:vars]\nansible_python_interpreter=/usr/bin/python3\n")
        f.write("\n[all:vars]\nansible_ssh_common_args='-o ServerAliveInterval=30'\n")


def measure(argv: list) -> tuple:
    """(wall seconds, peak RSS in MB) of one cold process, its output thrown away."""
    start = time.monotonic()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed (rc {proc.returncode}): {err.strip()[-500:]}")
    return wall, usage.ru_maxrss / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=50000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    venv = ensure_bench_venv()
    print_versions(venv)
    fleetops = shutil.which("fleetops") or os.path.join(os.path.dirname(sys.executable), "fleetops")
    tools = {"fleetops hosts --json": [fleetops, "hosts", "--json", "-i"],
             "ansible-inventory --list": [os.path.join(venv, "bin", "ansible-inventory"), "--list", "-i"]}
    with tempfile.TemporaryDirectory(prefix="fleetops-bench-inventory-") as d:
        inv = os.path.join(d, "hosts.ini")
        write_inventory(inv, args.hosts)
        print(f"inventory: {args.hosts} hosts, 20 groups and a children group, {os.path.getsize(inv) / 1e6:.1f} MB")
        runs: dict = {name: [] for name in tools}
        for _ in range(args.repeats):
            for name, argv in tools.items():            # interleaved: both meet the same machine load
                runs[name].append(measure(argv + [inv]))
    med = {name: (statistics.median(w for w, _ in r), statistics.median(m for _, m in r)) for name, r in runs.items()}
    print(f"\n| tool | wall (median of {args.repeats}) | peak RSS |\n|---|---|---|")
    for name, (wall, rss) in med.items():
        print(f"| {name} | {wall:.2f} s | {rss:.0f} MB |")
    (fw, fm), (aw, am) = med["fleetops hosts --json"], med["ansible-inventory --list"]
    print(f"\nfleetops is {aw / fw:.1f}x faster than ansible-inventory and uses {am / fm:.1f}x less memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
