"""Shared helpers for the benchmarks: a lab of N hosts, timing, medians, and the
alternative tools' venv (ansible-core, pyinfra) installed beside ours.

Benchmarks print figures and ratios measured in the same run on the same hosts;
they never assert a time.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_VENV = os.environ.get("FLEETOPS_BENCH_VENV", "/opt/fleetops-test/bench-venv")


def ensure_bench_venv() -> str:
    """Create the venv holding ansible-core and pyinfra (the alternatives) when missing."""
    if not os.path.exists(os.path.join(BENCH_VENV, "bin", "ansible")) or not os.path.exists(
        os.path.join(BENCH_VENV, "bin", "pyinfra")
    ):
        subprocess.run([sys.executable, "-m", "venv", BENCH_VENV], check=True)
        subprocess.run([os.path.join(BENCH_VENV, "bin", "pip"), "install", "-q", "ansible-core", "pyinfra"], check=True)
    return BENCH_VENV


def lab(n: int, state_dir: str, prefix: str):
    """Bring up (or reuse) a lab of n hosts; returns the Lab object."""
    sys.path.insert(0, ROOT)
    from fleetops.lab.lab import Lab

    lab = Lab(state_dir, prefix=prefix)
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
    """ansible-core with strict host keys against the lab's known_hosts and a fresh
    ControlPath directory per call, so every repeat pays for its connections (as fleetops does)."""
    import tempfile

    return dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
                ANSIBLE_SSH_ARGS=f"-o UserKnownHostsFile={lab.known_hosts_path} -o StrictHostKeyChecking=yes "
                                 "-o ControlMaster=auto -o ControlPersist=60s",
                ANSIBLE_SSH_CONTROL_PATH_DIR=tempfile.mkdtemp(dir=workdir), ANSIBLE_LOCAL_TEMP=workdir,
                ANSIBLE_NOCOLOR="1")
