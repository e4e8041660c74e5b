#!/usr/bin/env python3
"""Plays over a link with real latency: fleetops, ansible-core and pyinfra behind a delay proxy.

Real fleets are 30-150 ms from the operator, and there round trips decide. Every lab host is
put behind a TCP proxy on 127.0.0.1 that holds each chunk RTT/2 in each direction (order kept,
bandwidth unlimited), so each tool meets the same link. The play is `--tasks` tasks with
`gather_facts: false` (commands and one shell task in five, one registered), run on every host
at once (forks = hosts) from cold connections:

- fleetops: `fleetops run PLAY`;
- ansible-core: `ansible-playbook PLAY` with pipelining and ControlPersist (ControlMaster=auto,
  ControlPersist=60s, a fresh ControlPath directory each run), strict host keys;
- pyinfra: a deploy file of the same commands as `server.shell` operations, `--parallel` hosts.

Per run it prints wall time, wall time in round trips (wall / RTT), and the round trips the proxy
(fleetops/lab/delay.py) saw per host, median over hosts: direction changes of the byte stream / 2,
and the causal depth of the exchange (summed over the host's connections). Never asserts a time.

    python3 bench/wan.py [--rtt-ms 10,50,150] [--tasks 5,20] [--hosts 20,200] [--repeats 1]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (ROOT, ansible_env, ensure_bench_venv, fleetops_env, lab as make_lab, measured,  # noqa: E402
                     print_versions, rotated)

sys.path.insert(0, ROOT)
from fleetops.lab.delay import DelayProxy  # noqa: E402


def commands(n: int) -> list:
    """The play's commands: every fifth a shell pipeline, the rest plain commands."""
    return [("shell", f"echo task{i} | tr a-z A-Z") if i % 5 == 4 else ("command", f"echo task{i}")
            for i in range(n)]


def write_plays(workdir: str, n: int) -> tuple:
    tasks = []
    for i, (module, cmd) in enumerate(commands(n)):
        task = {"name": f"task {i}", module: cmd}
        if i == 0:
            task["register"] = "first"
        tasks.append(task)
    play = os.path.join(workdir, f"play{n}.yml")
    with open(play, "w") as f:
        json.dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}], f, indent=1)
    deploy = os.path.join(workdir, f"deploy{n}.py")
    with open(deploy, "w") as f:
        f.write("from pyinfra.operations import server\n")
        for i, (_, cmd) in enumerate(commands(n)):
            f.write(f"server.shell(name={f'task {i}'!r}, commands=[{cmd!r}])\n")
    return play, deploy


def write_inventories(lab, proxy: DelayProxy, workdir: str) -> dict:
    """fleetops YAML, ansible INI and pyinfra inventories, and a known_hosts, all on the proxy ports."""
    info = {h["name"]: h for h in json.load(open(lab.json_path))["hosts"]}
    known = os.path.join(workdir, "known_hosts")
    with open(known, "w") as f:
        for name, port in proxy.ports.items():
            pub = open(info[name]["host_key"] + ".pub").read().split()
            f.write(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
    fo = os.path.join(workdir, "fleetops.yml")
    with open(fo, "w") as f:
        hosts = {n: {"ansible_host": "127.0.0.1", "ansible_port": p, "ansible_user": info[n]["user"],
                     "ansible_ssh_private_key_file": lab.key_path} for n, p in proxy.ports.items()}
        json.dump({"all": {"hosts": hosts, "vars": {"fleetops_known_hosts": known}}}, f)
    ini = os.path.join(workdir, "ansible.ini")
    with open(ini, "w") as f:
        f.write("[lab]\n")
        for n, p in proxy.ports.items():
            f.write(f"{n} ansible_host=127.0.0.1 ansible_port={p} ansible_user={info[n]['user']} "
                    f"ansible_ssh_private_key_file={lab.key_path}\n")
    pyi = os.path.join(workdir, "pyinfra_inventory.py")
    with open(pyi, "w") as f:
        f.write("lab = [\n")
        for n, p in proxy.ports.items():
            data = {"ssh_hostname": "127.0.0.1", "ssh_port": p, "ssh_user": info[n]["user"],
                    "ssh_key": lab.key_path, "ssh_known_hosts_file": known,
                    "ssh_strict_host_key_checking": "yes"}
            f.write(f"    ({n!r}, {data!r}),\n")
        f.write("]\n")
    return {"fleetops": fo, "ansible": ini, "pyinfra": pyi, "known_hosts": known}


def tools(venv: str, inv: dict, play: str, deploy: str, forks: str, work: str, lab) -> dict:
    fo_env = fleetops_env()

    def ansible():
        env = ansible_env(lab, work)
        env["ANSIBLE_SSH_ARGS"] = env["ANSIBLE_SSH_ARGS"].replace(lab.known_hosts_path, inv["known_hosts"])
        return env
    return {
        "fleetops": ([sys.executable, "-m", "fleetops", "run", play, "-i", inv["fleetops"], "--forks", forks,
                      "--json", "--results", os.path.join(work, "runs")], lambda: fo_env),
        "ansible-core": ([os.path.join(venv, "bin", "ansible-playbook"), play, "-i", inv["ansible"], "-f", forks],
                         ansible),
        "pyinfra": ([os.path.join(venv, "bin", "pyinfra"), inv["pyinfra"], deploy, "--parallel", forks, "-y"],
                    lambda: None),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtt-ms", default="50", help="round-trip times to try, comma-separated")
    ap.add_argument("--tasks", default="5", help="play lengths to try, comma-separated")
    ap.add_argument("--hosts", default="20", help="fleet sizes to try, comma-separated")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--tools", default="fleetops,ansible-core,pyinfra")
    ap.add_argument("--lab-dir", default="/var/tmp/fleetops-bench-wan-lab")
    opts = ap.parse_args()
    rtts = [float(x) / 1000 for x in opts.rtt_ms.split(",")]
    sizes = [int(x) for x in opts.hosts.split(",")]
    lengths = [int(x) for x in opts.tasks.split(",")]
    chosen = opts.tools.split(",")
    venv = ensure_bench_venv()
    print_versions(venv)
    lab = make_lab(max(sizes), opts.lab_dir, prefix="fowan")
    info = json.load(open(lab.json_path))["hosts"]
    rows = []
    try:
        for n in sizes:
            for rtt in rtts:
                with DelayProxy({h["name"]: h["port"] for h in info[:n]}, rtt / 2) as proxy:
                    work = tempfile.mkdtemp(prefix="fleetops-bench-wan-")
                    inv = write_inventories(lab, proxy, work)
                    for length in lengths:
                        play, deploy = write_plays(work, length)
                        runs = tools(venv, inv, play, deploy, str(n), work, lab)
                        for rep in range(opts.repeats):
                            for name in rotated([t for t in runs if t in chosen], rep):
                                cmd, env = runs[name]
                                proxy.reset_counts()
                                r = measured(cmd, env=env(), cwd=work)
                                trips = statistics.median(proxy.turns.values()) / 2
                                depth = statistics.median(proxy.trips(h) for h in proxy.targets)
                                status = "ok" if r["rc"] == 0 else f"FAILED rc {r['rc']}: {(r['out'] + r['err'])[-300:]}"
                                rows.append((n, rtt, length, name, r["wall"], trips, depth, status))
                                print(f"{n} hosts, {rtt * 1000:.0f} ms, {length} tasks, {name}: {r['wall']:.2f} s, "
                                      f"{r['wall'] / rtt:.0f} RTT of wall, {trips:.0f} round trips per host, "
                                      f"{depth:.0f} causal ({status})", flush=True)
                    shutil.rmtree(work, ignore_errors=True)
    finally:
        lab.down()
    print("\n| hosts | RTT | tasks | tool | wall | wall / RTT | round trips per host (proxy) | causal |")
    print("|---|---|---|---|---|---|---|---|")
    for n, rtt, length, name, wall, trips, depth, status in rows:
        mark = "" if status == "ok" else " (failed)"
        print(f"| {n} | {rtt * 1000:.0f} ms | {length} | {name}{mark} | {wall:.2f} s | {wall / rtt:.0f} | {trips:.0f} "
              f"| {depth:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
