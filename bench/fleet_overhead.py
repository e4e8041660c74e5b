#!/usr/bin/env python3
"""Fleet overhead: one tiny task on N lab hosts, fleetops vs ansible-core vs pyinfra.

Same hosts, same known_hosts (strict checking for all three), same parallelism,
same run; each tool runs --repeats times, interleaved so machine noise hits all
three alike. Prints medians and ratios. Never asserts a time.

    python3 bench/fleet_overhead.py [--hosts 50] [--repeats 3] [--keep-lab]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, ansible_env, ensure_bench_venv, fleetops_env, lab as make_lab, median, timed  # noqa: E402

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
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep-lab", action="store_true")
    ap.add_argument("--lab-dir", default="/var/tmp/fleetops-bench-lab")
    opts = ap.parse_args()

    venv = ensure_bench_venv()
    lab = make_lab(opts.hosts, opts.lab_dir, prefix="fobench")
    work = tempfile.mkdtemp(prefix="fleetops-bench-")
    ini, pyi = write_alternative_inventories(lab, work)
    forks = str(opts.hosts)
    fleetops_cmd = [sys.executable, "-m", "fleetops", "run", os.path.join(ROOT, "bench", "playbooks", "sqlite_version.yml"),
                    "-i", lab.inventory_path, "--forks", forks, "--json", "--results", os.path.join(work, "runs")]
    ansible_cmd = [os.path.join(venv, "bin", "ansible"), "all", "-i", ini, "-m", "command",
                   "-a", f"python3 -c '{PY_CMD}'", "-f", forks, "-o"]
    pyinfra_cmd = [os.path.join(venv, "bin", "pyinfra"), pyi, "exec", "--parallel", forks, "-y", "--",
                   "python3", "-c", f"'{PY_CMD}'"]
    fo_env = fleetops_env()
    times = {"fleetops": [], "ansible-core": [], "pyinfra": []}
    try:
        for rep in range(opts.repeats):
            t, rc, out, err = timed(fleetops_cmd, env=fo_env, cwd=work)
            ok = rc == 0 and json.loads(out)["status"] == "ok"
            times["fleetops"].append(t) if ok else print(f"fleetops failed (rc {rc}): {err[-500:]}")
            env = ansible_env(lab, work)
            t, rc, out, err = timed(ansible_cmd, env=env, cwd=work)
            times["ansible-core"].append(t) if rc == 0 else print(f"ansible failed (rc {rc}): {(out + err)[-500:]}")
            t, rc, out, err = timed(pyinfra_cmd, cwd=work)
            times["pyinfra"].append(t) if rc == 0 else print(f"pyinfra failed (rc {rc}): {(out + err)[-500:]}")
            print(f"repeat {rep + 1}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items() if v))
    finally:
        if not opts.keep_lab:
            lab.down()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: median(v) for k, v in times.items()}
    print(f"\n{opts.hosts} hosts, forks {forks}, {opts.repeats} repeats (median seconds, wall clock):")
    for k, v in med.items():
        print(f"  {k:13s} {v:7.2f}s   runs: {', '.join(f'{x:.2f}' for x in times[k])}")
    f = med["fleetops"]
    print(f"  ansible-core / fleetops = {med['ansible-core'] / f:.1f}x")
    print(f"  pyinfra / fleetops      = {med['pyinfra'] / f:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
