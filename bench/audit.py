#!/usr/bin/env python3
"""Audit benchmark: `fleetops audit` on N lab hosts, each holding a healthy realistic
state.db, beside the same checks run through ansible-core's `script` module.

The ansible probe is the very same audit payload (fleetops/remote/hermes_audit.py and
what it imports), embedded in one self-contained Python script, so both tools run
identical checks on identical files; only the transport and orchestration differ.
Same hosts, same known_hosts (strict), same parallelism, interleaved repeats.
Prints medians and the ratio; never asserts a time.

    python3 bench/audit.py [--hosts 50] [--repeats 3] [--keep-lab]
"""
from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, ansible_env, ensure_bench_venv, fleetops_env, lab as make_lab, median, timed  # noqa: E402
from fleet_overhead import write_alternative_inventories  # noqa: E402

sys.path.insert(0, ROOT)


def standalone_probe(path: str) -> None:
    """One Python file that runs the audit payload exactly as fleetops ships it, minus SSH stdin."""
    from fleetops.engine.payload import BOOTSTRAP, bundle_sources, encode_input

    line = encode_input(bundle_sources("hermes_audit"), "fleetops.remote.hermes_audit", {}).strip()
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep-lab", action="store_true")
    ap.add_argument("--lab-dir", default="/var/tmp/fleetops-bench-lab")
    opts = ap.parse_args()

    venv = ensure_bench_venv()
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
    forks = str(opts.hosts)
    fo_cmd = [sys.executable, "-m", "fleetops", "audit", "-i", lab.inventory_path, "--json",
              "--results", os.path.join(work, "runs")]
    an_cmd = [os.path.join(venv, "bin", "ansible"), "all", "-i", ini, "-m", "script",
              "-a", f"{probe} executable=python3", "-f", forks, "-o"]
    fo_env = fleetops_env()
    times = {"fleetops": [], "ansible-core": []}
    try:
        for rep in range(opts.repeats):
            t, rc, out, err = timed(fo_cmd, env=fo_env, cwd=work)
            healthy = rc == 0
            if healthy:
                audit_seconds += [r.get("payload_seconds", 0) for r in json.loads(out)["hosts"].values()]
            times["fleetops"].append(t) if healthy else print(f"fleetops audit rc {rc}: {err[-400:]}")
            env = ansible_env(lab, work)
            t, rc, out, err = timed(an_cmd, env=env, cwd=work)
            ok = rc == 0 and out.count('\\"verdict\\": \\"healthy\\"') + out.count('"verdict": "healthy"') >= opts.hosts
            times["ansible-core"].append(t) if rc == 0 else print(f"ansible rc {rc}: {(out + err)[-400:]}")
            if rc == 0 and not ok:
                print("note: ansible output did not show every host healthy")
            print(f"repeat {rep + 1}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items() if v))
    finally:
        if not opts.keep_lab:
            lab.down()
        shutil.rmtree(work, ignore_errors=True)
    med = {k: median(v) for k, v in times.items()}
    print(f"\naudit of {opts.hosts} hosts, each a healthy {size / 1e6:.0f} MB state.db "
          f"(forks {forks}, {opts.repeats} repeats, median wall clock):")
    if audit_seconds:
        print(f"  host-side audit payload per host: median {median(audit_seconds):.2f}s "
              f"(sum {sum(audit_seconds) / len(times['fleetops']):.1f}s per run, all on this machine's cores)")
    for k, v in med.items():
        print(f"  {k:13s} {v:7.2f}s   runs: {', '.join(f'{x:.2f}' for x in times[k])}")
    print(f"  ansible-core / fleetops = {med['ansible-core'] / med['fleetops']:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
