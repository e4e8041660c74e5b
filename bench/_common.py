"""Shared helpers for the benchmarks: a lab of N hosts, timing, medians, and the
alternative tools' venv (ansible-core, pyinfra) installed beside ours.

Benchmarks print figures and ratios measured in the same run on the same hosts;
they never assert a time.
"""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_VENV = os.environ.get("FLEETOPS_BENCH_VENV", "/opt/fleetops-test/bench-venv")
# The alternatives compared, pinned: a figure is only comparable with another of the same versions.
PINS = {"ansible-core": "2.19.14", "pyinfra": "3.10.0"}


def _installed(venv: str) -> dict:
    code = ("import importlib.metadata as m, json; "
            f"print(json.dumps({{n: m.version(n) for n in {sorted(PINS)!r}}}))")
    try:
        p = subprocess.run([os.path.join(venv, "bin", "python"), "-c", code], capture_output=True, text=True)
        import json
        return json.loads(p.stdout) if p.returncode == 0 else {}
    except (OSError, ValueError):
        return {}


def ensure_bench_venv() -> str:
    """The venv holding ansible-core and pyinfra at their pinned versions (made or fixed when not)."""
    if _installed(BENCH_VENV) != PINS:
        if not os.path.exists(os.path.join(BENCH_VENV, "bin", "pip")):
            subprocess.run([sys.executable, "-m", "venv", BENCH_VENV], check=True)
        subprocess.run([os.path.join(BENCH_VENV, "bin", "pip"), "install", "-q",
                        *(f"{n}=={v}" for n, v in PINS.items())], check=True)
    return BENCH_VENV


def print_versions(venv: str) -> None:
    """Every tool compared, with its version, before any figure."""
    from fleetops import __version__
    ssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True)
    got = _installed(venv)
    print(f"versions: fleetops {__version__} (python {sys.version.split()[0]}), "
          + ", ".join(f"{n} {got.get(n, '?')}" for n in sorted(PINS))
          + f", {(ssh.stderr or ssh.stdout).strip()} (ansible's transport; fleetops and pyinfra use paramiko "
          + f"{_paramiko_version()})")


def _paramiko_version() -> str:
    try:
        import paramiko
        return paramiko.__version__
    except ImportError:
        return "?"


def rotated(names: list, rep: int) -> list:
    """The tools in a different order each repeat, so whoever runs first (cold caches, a
    quieter machine) is not always the same one."""
    k = rep % len(names)
    return names[k:] + names[:k]


def machine_cpu() -> float:
    """CPU seconds this machine has spent busy so far (all cores, /proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """User+system CPU seconds of this process's waited-for children (and theirs): the
    controller side of a tool run as a child (its worker processes and ssh clients included)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def end_ssh_masters(control_dir: str) -> float:
    """CPU seconds of the ssh ControlPersist masters a run left behind under `control_dir`
    (they detach, so getrusage never sees them: their share is the controller's), then end
    them (by PID: they are this bench's own)."""
    import signal
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            # a master retitles itself "ssh: CONTROL_PATH [mux]"
            if not argv or not (argv[0].startswith(b"ssh") or os.path.basename(argv[0]) == b"ssh") or \
                    control_dir.encode() not in b" ".join(argv):
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            os.kill(int(pid), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            continue
    return total


def tree_pss_mb(root: int) -> float:
    """PSS (MB) summed over process `root` and its descendants, from /proc: a tool that runs
    several processes (ansible-core's workers share most of their pages) is counted fairly."""
    children: dict = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                children.setdefault(int(f.read().rsplit(b")", 1)[-1].split()[1]), []).append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(ln.split()[1]) for ln in f if ln.startswith("Pss:"))
        except (OSError, StopIteration, ValueError):
            pass
    return total / 1024


def _timed_with_peak(cmd: list, env: dict | None, cwd: str | None) -> tuple:
    """timed(), plus the largest PSS of the command's process tree, sampled every 0.2 s."""
    import threading
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, done = [0.0], threading.Event()

    def sample():
        while not done.wait(0.2):
            peak[0] = max(peak[0], tree_pss_mb(p.pid))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = p.communicate()
    t = time.perf_counter() - t0
    done.set()
    sampler.join()
    return t, p.returncode, out, err, peak[0]


def measured(cmd: list, env: dict | None = None, cwd: str | None = None, memory: bool = False) -> dict:
    """Run a command: wall seconds, controller CPU (the tool's own process tree, with any ssh
    masters it left running), machine CPU (everything: the tool, the lab's sshd and the
    host-side processes), rc, stdout, stderr; with `memory`, the tree's peak PSS in MB."""
    c0, m0 = children_cpu(), machine_cpu()
    if memory:
        t, rc, out, err, peak = _timed_with_peak(cmd, env, cwd)
    else:
        (t, rc, out, err), peak = timed(cmd, env=env, cwd=cwd), None
    ctl = children_cpu() - c0
    control_dir = (env or {}).get("ANSIBLE_SSH_CONTROL_PATH_DIR")
    if control_dir:
        ctl += end_ssh_masters(control_dir)
    mach = machine_cpu() - m0
    return {"wall": t, "controller_cpu": ctl, "machine_cpu": mach, "host_cpu": max(0.0, mach - ctl),
            "rc": rc, "out": out, "err": err, "memory_mb": peak}


def lab(n: int, state_dir: str, prefix: str):
    """Bring up (or reuse) a lab of n hosts; returns the Lab object. FLEETOPS_BENCH_PREFIX
    replaces the user prefix, so two benches on one machine do not share Unix users."""
    sys.path.insert(0, ROOT)
    from fleetops.lab.lab import Lab

    lab = Lab(state_dir, prefix=os.environ.get("FLEETOPS_BENCH_PREFIX") or prefix)
    lab.up(n)
    return lab


def timed(cmd: list, env: dict | None = None, cwd: str | None = None) -> tuple:
    """Run a command, return (seconds, returncode, stdout, stderr)."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    return time.perf_counter() - t0, p.returncode, p.stdout, p.stderr


def fleetops_env() -> dict:
    """The environment fleetops is timed in: this source tree, bytecode compiled once as an
    installed package has it (pip compiles at install, and the alternatives' venv was
    installed so). Some machines set PYTHONDONTWRITEBYTECODE, which would make every timed
    run recompile fleetops from source while ansible-core and pyinfra load their .pyc files."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "fleetops")],
                   env=env, check=True)
    return env


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def ansible_env(lab, workdir: str) -> dict:
    """ansible-core with strict host keys against the lab's known_hosts, pipelining on, and a
    fresh ControlPath directory per call, so every repeat pays for its connections (as fleetops does)."""
    import tempfile

    return dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
                ANSIBLE_PIPELINING="True",    # how ansible users who care about speed run it
                ANSIBLE_SSH_ARGS=f"-o UserKnownHostsFile={lab.known_hosts_path} -o StrictHostKeyChecking=yes "
                                 "-o ControlMaster=auto -o ControlPersist=60s",
                ANSIBLE_SSH_CONTROL_PATH_DIR=tempfile.mkdtemp(dir=workdir), ANSIBLE_LOCAL_TEMP=workdir,
                ANSIBLE_NOCOLOR="1")
