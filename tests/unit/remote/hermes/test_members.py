"""members: the Hermes processes of a profile that hold no handle on its store (Hermes refused
them at open), found by their Hermes home; real processes, named as Hermes names them."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from fleetops.remote.hermes import members, steplib

SLEEP = "import time; time.sleep(120)"


@pytest.fixture
def spawn():
    started = []

    def run(argv0, env_home, *args, cwd=None, open_file=None):
        env = {k: v for k, v in os.environ.items() if k != "HERMES_HOME"}
        if env_home:
            env["HERMES_HOME"] = env_home
        code = SLEEP if not open_file else "f = open(%r, 'a'); %s" % (open_file, SLEEP)
        p = subprocess.Popen(["bash", "-c", 'exec -a "%s" %s -c "%s" %s' % (argv0, sys.executable, code, " ".join(args))],
                             env=env, cwd=cwd, stdin=subprocess.DEVNULL)
        started.append(p)
        return p
    yield run
    for p in started:
        p.kill()
        p.wait()


def pids(loc):
    return {m["pid"]: m for m in members.members(loc)}


def wait(pred):
    end = time.monotonic() + 30
    while not pred():
        assert time.monotonic() < end
        time.sleep(0.1)


def test_found_by_their_hermes_home_and_nothing_else(tmp_path, spawn):
    root = tmp_path / "hermes"
    (root / "profiles" / "work" / "logs").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    loc = steplib.locate({"hermes_home": str(root)})
    work = steplib.locate({"hermes_home": str(root), "profile": "work"})
    mine = spawn("hermes chat", str(root))
    gw_work = spawn("hermes gateway run --profile work", str(root))
    other = spawn("hermes chat", str(tmp_path / "other"))
    not_hermes = spawn("python3 worker.py", str(root))
    by_log = spawn("hermes gateway run", None, open_file=str(root / "profiles" / "work" / "logs" / "gateway.log"))
    # each process is looked for once it has started (and the one found by its log, once it holds it open)
    wait(lambda: mine.pid in pids(loc) and {gw_work.pid, by_log.pid} <= set(pids(work)))
    got = pids(loc)
    assert got[mine.pid]["kind"] == "tui" and "Hermes home" in got[mine.pid]["member"]
    assert not {gw_work.pid, other.pid, not_hermes.pid, by_log.pid} & set(got)
    wgot = pids(work)
    assert set(wgot) >= {gw_work.pid, by_log.pid} and mine.pid not in wgot
    assert "gateway.log open" in wgot[by_log.pid]["member"]
