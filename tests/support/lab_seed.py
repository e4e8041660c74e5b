"""Fixtures for the repair play on the lab: a seeder (damaged stores, live holders as each lab
user) whose processes are all killed by PID at the end, and a helper running the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.seed import Seeder, find_venv

REPO = Path(__file__).resolve().parents[2]
FAST = ["-e", "stop_quiet_window=3", "-e", "stop_grace=3"]




@pytest.fixture(scope="session")
def hermes_venv():
    v = find_venv()
    if v is None:
        pytest.skip("no hermes-agent venv the lab users can run (root's pyenv python is not reachable): "
                    "PYTHON=/usr/bin/python3 FLEETOPS_HERMES_VENV=/opt/fleetops-test/hermes-venv-shared "
                    "sh scripts/hermes-venv.sh")
    return v


@pytest.fixture
def seeder(lab, hermes_venv, tmp_path):
    s = Seeder(lab, tmp_path / "seed-registry.json", venv=hermes_venv)
    for h in lab.hosts:
        s.wipe(h["name"])
    yield s
    s.stop_all()


def run_cli(lab, results, *args, playbook="playbooks/repair.yml", hermes_bin=None, timeout=900, popen=False,
            env=None, cut_swap_after=None):
    """`fleetops run --json`; cut_swap_after=K runs it through tests/support/fault_injection.py, whose
    swap payload dies after its K-th rename."""
    head = [sys.executable, "-m", "fleetops"]
    if cut_swap_after is not None:
        from tests.support.fault_injection import __file__ as wrapper
        head = [sys.executable, wrapper, "--cut-swap-after", str(cut_swap_after), "--"]
    cmd = [*head, "run", str(REPO / playbook), "-i", lab.inventory_path,
           "--results", str(results), "--json", *FAST, *args]
    if hermes_bin:
        cmd += ["-e", f"hermes_bin={hermes_bin}"]
    if popen:
        return subprocess.Popen(cmd, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, env=dict(os.environ, **(env or {})))
    p = subprocess.run(cmd, cwd=str(REPO), capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    doc = json.loads(p.stdout) if p.stdout.strip() else None
    assert doc is not None, p.stderr[-3000:]
    return p.returncode, doc


def report(results, run_id, json_out=True, audit=False):
    cmd = [sys.executable, "-m", "fleetops", "report", run_id, "--results", str(results)] + (
        ["--audit"] if audit else [])
    if json_out:
        cmd.append("--json")
    p = subprocess.run(cmd, cwd=str(REPO), capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, COLUMNS="250"))
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout) if json_out else p.stdout


def results_by_task(doc) -> dict:
    """{task name: {host: (status, result)}} over every play of a run document."""
    out: dict = {}
    for play in doc["plays"]:
        for t in play["tasks"]:
            for h, r in t["results"].items():
                out.setdefault(t["name"], {})[h] = (r["status"], r["result"])
    return out
