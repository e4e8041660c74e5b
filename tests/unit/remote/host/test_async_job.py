"""The async_job and async_status payloads, run as a host runs them (their own python, a HOME of
the test's): a job outlives its starter, is killed at its limit, and its files are the user's
only (0700 directory, 0600 file, no way out of it by the job id)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time

from fleetops.remote.host import async_job

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(async_job.__file__))))


def _payload(name, args, home):
    code = (f"import json,sys; sys.path.insert(0, {ROOT!r}); from fleetops.remote.host import {name} as m; "
            "print(json.dumps(m.main(json.loads(sys.argv[1]))))")
    p = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                       env={"HOME": str(home), "PATH": os.environ["PATH"]}, timeout=30)
    return json.loads(p.stdout)


def _until_finished(jid, home, limit=60):     # a guard against a hang, not a speed check
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        got = _payload("async_status", {"jid": jid}, home)
        if got.get("finished"):
            return got
        time.sleep(0.2)
    raise AssertionError("the job never finished")


def test_a_job_runs_detached_and_leaves_its_result(tmp_path):
    go = tmp_path / "go"            # the job waits for the test: the starter must return before it ends
    line = f"while [ ! -e {go} ]; do sleep 0.05; done; echo done; cat"
    got = _payload("async_job", {"jid": "j1.1", "cmd": line, "time_limit": 20, "stdin": "aW4="}, tmp_path)
    assert got["started"] and not got["finished"]
    d = tmp_path / ".ansible_async"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    running = _payload("async_status", {"jid": "j1.1"}, tmp_path)
    assert running["finished"] is False and running["started"] is True
    go.write_text("")
    done = _until_finished("j1.1", tmp_path)
    assert (done["rc"], done["stdout"]) == (0, "done\nin")
    assert stat.S_IMODE((d / "j1.1").stat().st_mode) == 0o600
    erased = _payload("async_status", {"jid": "j1.1", "mode": "cleanup"}, tmp_path)
    assert erased["erased"].endswith("j1.1") and not (d / "j1.1").exists()


def test_a_job_is_killed_at_its_limit(tmp_path):
    _payload("async_job", {"jid": "j2.1", "cmd": "sleep 30", "time_limit": 1}, tmp_path)
    done = _until_finished("j2.1", tmp_path)
    assert done["msg"] == "Timeout exceeded" and done["failed"] and done["child_pid"]


def test_a_job_id_cannot_name_a_file_elsewhere(tmp_path):
    for jid in ("../x", "/etc/passwd", "", "a/b"):
        got = _payload("async_status", {"jid": jid}, tmp_path)
        assert got["failed"] and "not a job id" in got["msg"]
    missing = _payload("async_status", {"jid": "j9.9"}, tmp_path)
    assert missing["msg"] == "could not find job" and missing["failed"]
