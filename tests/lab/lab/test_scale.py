"""A fleet of a few hundred real lab hosts (16 to an sshd): a play and the audit account for every
host, the results store holds every result, and the live view stays one line per task.

Not timed: bench/ measures speed. The hosts are real sshd logins, one Unix user and home each,
each holding a small state.db written by the real hermes-agent SessionDB.
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import pytest

from fleetops.lab import Lab
from tests.corpus import build
from tests.support.paths import REPO

pytestmark = pytest.mark.lab

ROOT = REPO
HOSTS = 200
PLAYBOOK = """\
- name: fleet
  hosts: all
  gather_facts: false
  tasks:
    - name: sqlite version
      python: {payload: sqlite_version}
    - name: who am i
      command: whoami
      register: me
    - name: the login is the host's own user
      assert:
        that: me.stdout == ansible_user
"""


@pytest.fixture(scope="module")
def big_lab(lab, tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("the sshd lab needs root")
    try:
        build.venv_python()
    except build.HermesVenvMissing as exc:
        pytest.fail(str(exc))
    src = tmp_path_factory.mktemp("small") / "state.db"
    build.realistic_db(src, sessions=3, messages_per_session=(3, 6), seed=7)
    state_dir = tempfile.mkdtemp(prefix="fleetops-biglab-")
    big = Lab(state_dir, prefix=(lab.prefix + "k")[:20])
    try:
        big.up(HOSTS, per_sshd=16)
        for h in big.hosts:
            pw = pwd.getpwnam(h["user"])
            hermes = os.path.join(pw.pw_dir, ".hermes")
            shutil.rmtree(hermes, ignore_errors=True)
            os.mkdir(hermes, 0o700)
            shutil.copyfile(src, os.path.join(hermes, "state.db"))
            for p, mode in ((hermes, 0o700), (os.path.join(hermes, "state.db"), 0o600)):
                os.chown(p, pw.pw_uid, pw.pw_gid)
                os.chmod(p, mode)
        yield big
    finally:
        big.down()
        big.clean()
        shutil.rmtree(state_dir, ignore_errors=True)


def _fleetops(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="160")
    env.pop("FLEETOPS_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "fleetops", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def test_a_play_and_an_audit_on_a_few_hundred_hosts(big_lab, tmp_path):
    assert len({h["pid"] for h in big_lab.hosts}) == HOSTS // 16 + 1
    pb = tmp_path / "fleet.yml"
    pb.write_text(PLAYBOOK)
    runs = tmp_path / "runs"
    proc = _fleetops("run", pb, "-i", big_lab.inventory_path, "--forks", "50", "--results", runs, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert len(lines) < 30, proc.stdout[-3000:]          # one progress line per task, not one per host
    progress = [ln for ln in lines if "done ·" in ln]
    assert len(progress) == 3 and all(f"{HOSTS}/{HOSTS} done · " in ln and "failed 0 · unreachable 0" in ln
                                      for ln in progress), progress
    assert f"who am i: {HOSTS}/{HOSTS} done · ok 0 · changed {HOSTS}" in progress[1]     # command: changed
    assert f"Recap {HOSTS} host(s): ok {3 * HOSTS} · changed {HOSTS} · unreachable 0 · failed 0" in proc.stdout

    db = sqlite3.connect(runs / "runs.db")
    run_id = db.execute("SELECT id FROM runs").fetchone()[0]
    n = db.execute("SELECT count(*) FROM task_results WHERE run_id = ?", (run_id,)).fetchone()[0]
    assert n == 3 * HOSTS, n

    proc = _fleetops("audit", "-i", big_lab.inventory_path, "--results", runs, "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    verdicts = {(r["host"], r["profile"]): r["verdict"] for r in doc["databases"]}
    assert verdicts == {(h["name"], "default"): "healthy" for h in big_lab.hosts}
