#!/usr/bin/env python3
"""Scale: one payload and the audit on 100, 300 and 1,000 lab hosts, fleetops beside ansible-core
(pipelining on) and pyinfra (`exec`), the same hosts, the same forks, in the same run.

For each tool and size it prints wall time, controller CPU (the tool's whole process tree, with
the ssh masters ansible-core leaves behind) and peak controller memory (the largest sum of PSS
over the tool's process tree, sampled every 0.2 s: ansible-core runs several processes, so one
process's RSS would undercount it), then how each grows from the smallest size to the largest. The order of the tools rotates between repeats. Never asserts a time.

The hosts are one lab of the largest size (16 hosts to an sshd, each its own port and user), each
holding a small healthy state.db written by the real hermes-agent SessionDB; a smaller size uses
the first N hosts.

    python3 bench/scale.py [--sizes 100,300,1000] [--forks 50] [--repeats 1] [--keep-lab]
                           [--what payload,audit] [--tools fleetops,ansible-core,pyinfra]
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
from audit import seed, standalone_probe  # noqa: E402

sys.path.insert(0, ROOT)
PY_CMD = "import sqlite3; print(sqlite3.sqlite_version)"


def inventories(lab, n: int, workdir: str) -> dict:
    """The first n lab hosts as a fleetops YAML, an ansible INI and a pyinfra inventory."""
    import yaml

    hosts = sorted(json.load(open(lab.json_path))["hosts"], key=lambda h: int(h["name"][3:]))[:n]
    d = os.path.join(workdir, f"n{n}")
    os.makedirs(d, exist_ok=True)
    fo = os.path.join(d, "inventory.yml")
    with open(fo, "w") as f:
        yaml.safe_dump({"all": {"vars": {"fleetops_known_hosts": lab.known_hosts_path}, "hosts": {
            h["name"]: {"ansible_host": "127.0.0.1", "ansible_port": h["port"], "ansible_user": h["user"],
                        "ansible_ssh_private_key_file": lab.key_path} for h in hosts}}}, f)
    ini = os.path.join(d, "ansible.ini")
    with open(ini, "w") as f:
        f.write("[lab]\n" + "".join(
            f"{h['name']} ansible_host=127.0.0.1 ansible_port={h['port']} ansible_user={h['user']} "
            f"ansible_ssh_private_key_file={lab.key_path}\n" for h in hosts))
    pyi = os.path.join(d, "pyinfra_inventory.py")
    with open(pyi, "w") as f:
        f.write("lab = [\n" + "".join(
            f"    ({h['name']!r}, {dict(ssh_hostname='127.0.0.1', ssh_port=h['port'], ssh_user=h['user'], ssh_key=lab.key_path, ssh_known_hosts_file=lab.known_hosts_path, ssh_strict_host_key_checking='yes')!r}),\n"
            for h in hosts) + "]\n")
    return {"fleetops": fo, "ansible": ini, "pyinfra": pyi}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,300,1000")
    ap.add_argument("--forks", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--keep-lab", action="store_true")
    ap.add_argument("--lab-dir", default="/var/tmp/fleetops-bench-scale-lab")
    ap.add_argument("--what", default="payload,audit", help="which of payload,audit to run")
    ap.add_argument("--tools", default="fleetops,ansible-core,pyinfra", help="which tools to run")
    opts = ap.parse_args()
    sizes = sorted(int(x) for x in opts.sizes.split(","))

    venv = ensure_bench_venv()
    print_versions(venv)
    lab = make_lab(sizes[-1], opts.lab_dir, prefix="foscale")
    work = tempfile.mkdtemp(prefix="fleetops-bench-scale-")
    from tests.corpus import build
    db = os.path.join(work, "state.db")
    build.realistic_db(db, sessions=3, messages_per_session=(3, 6), seed=7)
    seed(lab, db)
    probe = os.path.join(work, "probe.py")
    standalone_probe(probe)
    forks = str(opts.forks)
    fo_env = fleetops_env()
    rows: dict = {}
    try:
        for n in sizes:
            inv = inventories(lab, n, work)
            cmds = {
                ("payload", "fleetops"): ([sys.executable, "-m", "fleetops", "run",
                                           os.path.join(ROOT, "bench", "playbooks", "sqlite_version.yml"), "-i",
                                           inv["fleetops"], "--forks", forks, "--json", "--results",
                                           os.path.join(work, "runs")], fo_env),
                ("payload", "ansible-core"): ([os.path.join(venv, "bin", "ansible"), "all", "-i", inv["ansible"],
                                               "-m", "command", "-a", f"python3 -c '{PY_CMD}'", "-f", forks, "-o"],
                                              "ansible"),
                ("payload", "pyinfra"): ([os.path.join(venv, "bin", "pyinfra"), inv["pyinfra"], "exec", "--parallel",
                                          forks, "-y", "--", "python3", "-c", f"'{PY_CMD}'"], None),
                ("audit", "fleetops"): ([sys.executable, "-m", "fleetops", "audit", "-i", inv["fleetops"],
                                         "--forks", forks, "--json", "--results", os.path.join(work, "runs")], fo_env),
                ("audit", "ansible-core"): ([os.path.join(venv, "bin", "ansible"), "all", "-i", inv["ansible"],
                                             "-m", "script", "-a", f"{probe} executable=/usr/bin/python3",
                                             "-f", forks, "-o"], "ansible"),
            }
            wanted = [k for k in cmds if k[0] in opts.what.split(",") and k[1] in opts.tools.split(",")]
            for rep in range(opts.repeats):
                for key in rotated(wanted, rep):
                    cmd, env = cmds[key]
                    if env == "ansible":
                        env = ansible_env(lab, work)          # pipelining on, strict host keys
                    m = measured(cmd, env=env, cwd=work, memory=True)
                    ok = m["rc"] in (0, 5) if key == ("audit", "fleetops") else m["rc"] == 0
                    if not ok:
                        print(f"{key} on {n} hosts failed (rc {m['rc']}): {(m['out'] + m['err'])[-400:]}")
                        continue
                    rows.setdefault((key, n), []).append(m)
                    print(f"{n:5d} hosts  {key[0]:8s} {key[1]:13s} {m['wall']:7.2f}s wall "
                          f"{m['controller_cpu']:7.2f}s controller cpu {m['memory_mb']:7.1f} MB", flush=True)
    finally:
        if not opts.keep_lab:
            lab.down()
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nforks {forks}, {opts.repeats} repeat(s), medians (controller CPU, peak PSS of the tool's processes)")
    print(f"{'what':8s} {'tool':13s} " + " ".join(f"{n:>22d}" for n in sizes) + "   growth (largest/smallest)")
    for what, tool in cmds:
        cells, first, last = [], None, None
        for n in sizes:
            ms = rows.get(((what, tool), n), [])
            if not ms:
                cells.append(f"{'-':>22s}")
                continue
            w, c, mem = (median([m[k] for m in ms]) for k in ("wall", "controller_cpu", "memory_mb"))
            cells.append(f"{w:6.1f}s {c:6.1f}cpu {mem:5.0f}MB")
            first = first or (n, w, c, mem)
            last = (n, w, c, mem)
        growth = (f"wall {last[1] / first[1]:.1f}x, cpu {last[2] / first[2]:.1f}x, mem {last[3] / first[3]:.1f}x "
                  f"for {last[0] / first[0]:.0f}x hosts") if first and last and last is not first else ""
        print(f"{what:8s} {tool:13s} " + " ".join(cells) + "   " + growth)
    for what in ("payload", "audit"):
        for n in sizes:
            fo = rows.get(((what, "fleetops"), n))
            if not fo:
                continue
            f = median([m["wall"] for m in fo])
            others = [f"{tool} {median([m['wall'] for m in rows[((what, tool), n)]]) / f:.2f}x"
                      for tool in ("ansible-core", "pyinfra") if rows.get(((what, tool), n))]
            print(f"{what} at {n} hosts, wall relative to fleetops: " + ", ".join(others))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
