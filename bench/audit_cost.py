#!/usr/bin/env python3
"""Audit cost on the host: the audit payload on Hermes stores of about 0.3, 1 and 3 GB, beside
`PRAGMA quick_check` alone and a plain sequential read of the file (the I/O floor), cold and
warm cache, in the same run on the same files.

For each size and cache state it prints wall time, CPU (user+system of the measuring child
process) and bytes read (/proc/self/io: read_bytes is what came from the disk, rchar every
byte read() returned, page cache hits included), then the audit's own per-check figures
(its `checks` field: each check's wall, thread CPU and thread I/O), the ratios the audit is
judged by (wall against quick_check alone, warm; bytes against the file's size, cold) and the
cost per GB. Cold means the store's files were dropped from the page cache with
posix_fadvise(POSIX_FADV_DONTNEED) just before the run (only this store's pages: the machine's
other work keeps its cache). Each figure is measured in a fresh child process; the order of the
variants rotates between repeats. The machine's load average and busy CPU during the run are
printed: on a shared machine read the ratios, not the absolute times. Never asserts a time.

The stores are written by the real hermes-agent SessionDB (bench/audit_stores.py: the 0.3 GB one
is the suite's BIG store) and kept in --store-dir, built once (3 GB takes a while), never in
the repository.

    python3 bench/audit_cost.py [--sizes 0.3,1,3] [--repeats 3] [--store-dir /var/tmp/fleetops-bench-audit]
                                [--sqlite pysqlite3] [--memory-mb 512]

`--sqlite pysqlite3` measures every variant under pysqlite3-binary's newer SQLite (put in the place
of the `sqlite3` module before anything imports it), as a host with SQLite 3.44+ runs them.
`--memory-mb N` runs each variant, cold, in a memory cgroup of N MB (root), so a store bigger than
N cannot stay in the page cache: what the audit reads from the disk on a host short of memory.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, machine_cpu, median, rotated  # noqa: E402
import audit_stores  # noqa: E402

VARIANTS = {
    "read": "sequential read of the file (the I/O floor)",
    "quick_check": "PRAGMA quick_check alone",
    "audit": "the audit payload (as `fleetops inspect`)",
    "audit_1job": "the audit payload, one job (every check in one pass, as before)",
    "audit_budget": "the audit payload with a budget below the store (no FTS index walk)",
}


def _proc_io() -> dict:
    with open("/proc/self/io") as f:
        return {k: int(v) for k, v in (ln.split(": ") for ln in f.read().splitlines())}


def use_sqlite(module: str) -> None:
    """Put `module` (pysqlite3) in the place of the standard sqlite3 before anything imports it."""
    if module == "pysqlite3":
        import pysqlite3.dbapi2
        sys.modules["sqlite3"] = pysqlite3.dbapi2


def child(kind: str, db: str) -> dict:
    """One measurement in this (fresh) process: figures of this process only."""
    sys.path.insert(0, ROOT)
    use_sqlite(os.environ.get("FLEETOPS_BENCH_SQLITE", "stdlib"))
    io0, t0, r0 = _proc_io(), time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    extra = {}
    if kind == "read":
        with open(db, "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
    elif kind == "quick_check":
        import sqlite3
        conn = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
        extra["result"] = conn.execute("PRAGMA quick_check").fetchall()[:1]
        conn.close()
    else:
        from fleetops.remote.hermes import audit as hermes_audit
        args = {"db_path": db, "services": False}
        if kind == "audit_1job":
            args["jobs"] = 1
        elif kind == "audit_budget":
            args["budget_gb"] = 0.01
        res = hermes_audit.main(args)
        d = res["databases"][0]
        extra = {"verdict": d["verdict"], "checks": d["checks"], "parallel": d.get("parallel"),
                 "skipped": [s["check"] for s in d["skipped_checks"]]}
    wall = time.perf_counter() - t0
    r1, io1 = resource.getrusage(resource.RUSAGE_SELF), _proc_io()
    return dict(extra, wall=wall, cpu=(r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
                read_bytes=io1["read_bytes"] - io0["read_bytes"], rchar=io1["rchar"] - io0["rchar"])


def drop_cache(db: str) -> None:
    """This store's pages out of the page cache (POSIX_FADV_DONTNEED; clean pages only)."""
    for s in ("", "-wal", "-shm"):
        try:
            fd = os.open(db + s, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class MemoryCgroup:
    """A memory cgroup of `mb` MB (v2 where its memory controller is on, else v1) for one child:
    its page cache is charged there, so a store bigger than the limit cannot stay cached, as on a
    host whose free memory is smaller than its store."""

    def __init__(self, mb: int):
        v2 = "/sys/fs/cgroup"
        name = "fleetops-bench-%d" % os.getpid()
        if "memory" in (open(v2 + "/cgroup.controllers").read().split()
                        if os.path.exists(v2 + "/cgroup.controllers") else []):
            self.path, limit, self.procs = os.path.join(v2, name), "memory.max", "cgroup.procs"
        else:
            self.path, limit, self.procs = os.path.join(v2, "memory", name), "memory.limit_in_bytes", "tasks"
        os.makedirs(self.path, exist_ok=True)
        with open(os.path.join(self.path, limit), "w") as f:
            f.write(str(mb * 2 ** 20))

    def enter(self) -> None:
        """In the child, before exec: join the cgroup."""
        with open(os.path.join(self.path, self.procs), "w") as f:
            f.write(str(os.getpid()))

    def remove(self) -> None:
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def measure(kind: str, db: str, cold: bool) -> dict:
    if cold:
        drop_cache(db)
    else:
        child("read", db)          # warm: every page in the cache before the run
    cg = MemoryCgroup(SQLITE["memory_mb"]) if SQLITE.get("memory_mb") else None
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, db],
                           capture_output=True, text=True, preexec_fn=cg.enter if cg else None,
                           env=dict(os.environ, FLEETOPS_BENCH_SQLITE=SQLITE["module"]))
    finally:
        if cg:
            cg.remove()
    if p.returncode != 0:
        raise RuntimeError("%s on %s failed: %s" % (kind, db, p.stderr[-800:]))
    return json.loads(p.stdout.strip().splitlines()[-1])


SQLITE: dict = {"module": "stdlib", "memory_mb": 0}


def mb(n) -> str:
    return "%8.1f" % (n / 1e6) if n is not None else "       -"


def report(size_gb: float, db: str, rows: dict) -> None:
    size = os.path.getsize(db)
    print("\n== store %s: %s, %.1f MB" % (audit_stores.label(size_gb), db, size / 1e6))
    print("%-13s %-5s %8s %8s %12s %12s" % ("what", "cache", "wall s", "cpu s", "read_bytes MB", "rchar MB"))
    med = {}
    for (kind, cold), ms in sorted(rows.items(), key=lambda kv: (list(VARIANTS).index(kv[0][0]), kv[0][1])):
        m = {k: median([x[k] for x in ms]) for k in ("wall", "cpu", "read_bytes", "rchar")}
        med[(kind, cold)] = m
        extra = ""
        if ms[-1].get("verdict"):
            extra = "  verdict %s, jobs %s%s" % (ms[-1]["verdict"], (ms[-1].get("parallel") or {}).get("jobs"),
                                                 ", skipped " + ", ".join(ms[-1]["skipped"]) if ms[-1]["skipped"] else "")
        print("%-13s %-5s %8.3f %8.3f %13s %12s%s" % (kind, "cold" if cold else "warm", m["wall"], m["cpu"],
                                                    mb(m["read_bytes"]), mb(m["rchar"]), extra))
    for cold in (True, False):
        ms = rows.get(("audit", cold))
        if not ms:
            continue
        print("audit per check (%s cache, last run):" % ("cold" if cold else "warm"))
        for name, c in ms[-1]["checks"].items():
            print("    %-32s %7.3fs wall %7.3fs cpu %s MB read_bytes %s MB rchar" % (
                name, c["seconds"], c["cpu_seconds"], mb(c["read_bytes"]).strip(), mb(c["rchar"]).strip()))
    qc, au = med.get(("quick_check", False)), med.get(("audit", False))
    gb = size / 2.0 ** 30
    if qc and au:
        print("ratio audit/quick_check (warm wall): %.2fx; one job: %.2fx; budgeted: %.2fx" % (
            au["wall"] / qc["wall"], med[("audit_1job", False)]["wall"] / qc["wall"],
            med[("audit_budget", False)]["wall"] / qc["wall"]))
        checks = rows[("audit", False)][-1]["checks"]
        need = sum(c["cpu_seconds"] for c in checks.values())
        cores = os.cpu_count() or 1
        floor = max(need / cores, checks.get("integrity", {}).get("cpu_seconds", 0))
        print("floor: the audit's checks took %.3f CPU s (warm, last run); on %d cores, and never under the "
              "integrity check (one statement), no schedule of them takes under %.3f s: %.2fx quick_check alone"
              % (need, cores, floor, floor / qc["wall"]))
    ac = med.get(("audit", True))
    if ac:
        print("audit reads (cold%s): %.2fx the file from disk (read_bytes), %.2fx through read() (rchar)"
              % (", %d MB of memory" % SQLITE["memory_mb"] if SQLITE["memory_mb"] else "",
                 ac["read_bytes"] / size, ac["rchar"] / size))
    if ac and au and qc:
        print("per GB: audit %.2f s warm, %.2f s cold, %.2f CPU s; quick_check %.2f s warm; read floor %.2f s cold"
              % (au["wall"] / gb, ac["wall"] / gb, au["cpu"] / gb, qc["wall"] / gb,
                 med[("read", True)]["wall"] / gb))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0.3,1,3", help="store sizes in GB (0.3 is the suite's BIG store)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--store-dir", default=audit_stores.DEFAULT_DIR)
    ap.add_argument("--sqlite", choices=("stdlib", "pysqlite3"), default="stdlib",
                    help="which SQLite every variant runs on (pysqlite3: pysqlite3-binary's newer one)")
    ap.add_argument("--memory-mb", type=int, default=0,
                    help="run each variant in a memory cgroup of this many MB, cold only (a host whose free "
                         "memory is smaller than its store: what the audit then reads from the disk)")
    ap.add_argument("--child", nargs=2, metavar=("KIND", "DB"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(*a.child)))
        return 0
    SQLITE["module"], SQLITE["memory_mb"] = a.sqlite, a.memory_mb
    use_sqlite(a.sqlite)
    sizes = [float(s) for s in a.sizes.split(",")]
    dbs = {s: audit_stores.store(a.store_dir, s) for s in sizes}   # built before anything is timed
    print("python %s, SQLite %s, %d cores; load average before: %s" % (
        sys.version.split()[0], __import__("sqlite3").sqlite_version, os.cpu_count(),
        " ".join(open("/proc/loadavg").read().split()[:3])))
    t0, m0 = time.monotonic(), machine_cpu()
    for s in sizes:
        rows: dict = {}
        keys = [(k, cold) for k in VARIANTS for cold in ((True,) if a.memory_mb else (True, False))]
        for rep in range(a.repeats):
            for key in rotated(keys, rep):
                rows.setdefault(key, []).append(measure(key[0], dbs[s], key[1]))
        report(s, dbs[s], rows)
    span = time.monotonic() - t0
    print("\nmachine: %.0f%% of %d cores busy during the run (this bench included); load average after: %s"
          % (100 * (machine_cpu() - m0) / span / os.cpu_count(), os.cpu_count(),
             " ".join(open("/proc/loadavg").read().split()[:3])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
