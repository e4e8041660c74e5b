"""A live writer never makes a healthy store look damaged: hermes-agent's own SessionDB commits
throughout many audits of a WAL store, and every audit must say `healthy`.

Two writers, as the field has them: a gateway holding one connection (the -wal and -shm stay),
and cron-style turns that open, write and close (the last close deletes -wal and -shm, so an audit
often opens a bare WAL-mode file that a writer starts writing and checkpointing into mid-read)."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from fleetops.remote.hermes import audit as hermes_audit
from tests.corpus import build
from tests.support.paths import REPO

AUDITS = 100   # the field saw one false alarm in about 30 audits of a busy store


@pytest.mark.parametrize("style", ["persistent", "per_turn"])
def test_busy_writer_never_a_false_alarm(standard_src, tmp_path, style):
    db = tmp_path / "state.db"
    shutil.copyfile(standard_src, db)
    stop, count = tmp_path / "stop", tmp_path / "count"
    env = dict((k, v) for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV"))
    env.update(build.HERMES_ENV, HERMES_HOME=str(tmp_path / "home"))
    writer = subprocess.Popen([str(build.venv_python()), str(REPO / "tests" / "support" / "live_writer.py"),
                               str(db), str(stop), str(count), style], env=env, cwd=str(tmp_path),
                              stderr=subprocess.PIPE, text=True)
    bad, commits = [], []
    try:
        deadline = time.monotonic() + 60
        while not count.exists() and writer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert count.exists(), "the writer never committed: %s" % (writer.stderr.read() if writer.poll() else "")
        for _ in range(AUDITS):
            before = int(count.read_text())
            rec = hermes_audit.main({"db_path": str(db), "tooling": False, "holders": False})["databases"][0]
            commits.append(int(count.read_text()) - before)
            if rec["verdict"] != "healthy":
                bad.append((rec["verdict"], rec["reasons"][:2], rec["open_mode"]))
    finally:
        stop.write_text("")
        try:
            writer.wait(timeout=30)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, writer.stderr.read()
    assert bad == [], "%d of %d audits of a healthy store not healthy: %s" % (len(bad), AUDITS, bad[:3])
    # the writer did commit during the audits (on a loaded machine it gets fewer turns, not none)
    assert sum(1 for c in commits if c) >= AUDITS // 4, commits
