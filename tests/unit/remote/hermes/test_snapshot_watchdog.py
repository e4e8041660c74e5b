"""exit_with_connection: a payload whose connection is gone exits at once (real processes,
real pipes and a real pty; no SSH needed to see the mechanism)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from tests.support.paths import REPO

REPO = str(REPO)
CHILD = ("import sys, time; sys.path.insert(0, sys.argv[1]);"
         "from fleetops.remote.hermes import steplib as s;"
         "armed = s.exit_with_connection(interval=0.05);"
         "print('armed' if armed else 'not armed', flush=True); time.sleep(60)")


def _start(stderr):
    return subprocess.Popen([sys.executable, "-c", CHILD, REPO], stdout=subprocess.PIPE, stderr=stderr,
                            stdin=subprocess.DEVNULL)


def _exit_code(p, timeout=10):
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return "still running after %ss" % timeout


def test_exits_when_its_stderr_pipe_loses_its_reader():
    r, w = os.pipe()
    p = _start(w)
    os.close(w)
    assert p.stdout.readline().strip() == b"armed"
    os.close(r)  # the channel is gone
    assert _exit_code(p) == 75


def test_exits_when_its_terminal_hangs_up():
    """A payload run on a terminal (sudo's use_pty from a terminal, a pty-allocating wrapper):
    stderr is a pty; its master going away is a hang-up."""
    master, slave = os.openpty()
    p = _start(slave)
    os.close(slave)
    assert p.stdout.readline().strip() == b"armed"
    time.sleep(0.2)
    assert p.poll() is None  # a live terminal is not a hang-up
    os.close(master)
    assert _exit_code(p) == 75


def test_not_armed_when_stderr_is_a_file(tmp_path):
    with open(tmp_path / "err", "wb") as f:
        p = _start(f)
    assert p.stdout.readline().strip() == b"not armed"
    p.kill()
    p.wait()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_exits_when_its_parent_dies(tmp_path):
    """The session process that started it dies (stderr left open elsewhere): exit, not orphan."""
    r, w = os.pipe()
    pidfile = tmp_path / "pid"
    mid = subprocess.Popen([sys.executable, "-c",
                            "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', sys.argv[1], "
                            "sys.argv[2]], stderr=int(sys.argv[4]), stdout=subprocess.DEVNULL, pass_fds=(int(sys.argv[4]),));"
                            "open(sys.argv[3], 'w').write(str(p.pid)); import time; time.sleep(60)",
                            CHILD, REPO, str(pidfile), str(w)], pass_fds=(w,))
    deadline = time.monotonic() + 10
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    child = int(pidfile.read_text())
    time.sleep(0.5)  # armed
    mid.kill()
    mid.wait()
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
        except OSError:
            break
        time.sleep(0.05)
    assert time.monotonic() < deadline, "the orphan is still running"
    os.close(w)
    os.close(r)
