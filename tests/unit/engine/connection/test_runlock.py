"""The run lock holds on every host or the host is refused: the lock command runs in a real
sh (the one a host's sshd would start), with flock(1) hidden from it by a private mount
namespace, and with neither flock(1) nor python3, to show the python fallback and the refusal."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from fleetops.engine.connection import runlock

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="needs root and unshare(1) to hide flock(1) in a mount namespace")


class PipeChannel:
    """The part of a paramiko channel runlock uses, over a local `sh -c` process."""

    def __init__(self, command: str, hide=()):
        hide_cmd = "".join(f"mount --bind {NOEXEC} {p} && " for p in hide)
        self.proc = subprocess.Popen(["unshare", "-m", "sh", "-c", hide_cmd + 'exec sh -c "$0"', command],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={"PATH": "/usr/bin:/bin", "HOME": HOME})
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.timeout = 1.0

    def settimeout(self, t):
        self.timeout = t

    def recv(self, n):
        end = time.monotonic() + self.timeout
        while True:
            try:
                data = os.read(self.proc.stdout.fileno(), n)
                return data
            except BlockingIOError:
                if time.monotonic() > end:
                    import socket
                    raise socket.timeout() from None
                time.sleep(0.01)

    def shutdown_write(self):
        self.proc.stdin.close()

    def close(self):
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


NOEXEC = HOME = ""


class Host:
    """A stand-in transport: `start` runs the lock command in its own sh, like a new SSH channel."""

    def __init__(self, hide=()):
        self.hide = hide
        self.params = type("P", (), {"name": "h1", "command_timeout": 20})()
        self.chans = []

    def start(self, command):
        ch = PipeChannel(command, self.hide)
        self.chans.append(ch)
        return ch


@pytest.fixture(autouse=True)
def _home(tmp_path):
    global NOEXEC, HOME
    NOEXEC = str(tmp_path / "not-a-program")
    open(NOEXEC, "w").close()
    os.chmod(NOEXEC, 0o644)
    HOME = str(tmp_path / "home")
    os.mkdir(HOME)
    yield


FLOCK = [p for p in ("/usr/bin/flock", "/bin/flock") if os.path.exists(p)]
PYTHONS = [p for p in ("/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3") if os.path.exists(p)]


@pytest.mark.parametrize("first,second", [("python", "python"), ("flock", "python"), ("python", "flock")])
def test_the_lock_holds_without_flock_and_both_ways_interlock(first, second):
    way = {"flock": Host(), "python": Host(hide=FLOCK)}
    held = runlock.acquire(way[first], "run-A")
    assert held is not None
    try:
        with pytest.raises(runlock.HostBusy, match=r"host busy: .*run run-A"):
            runlock.acquire(way[second], "run-B")
    finally:
        held.close()
    again = runlock.acquire(way[second], "run-C")   # released with its channel
    assert again is not None
    again.close()


def test_a_host_where_no_lock_can_be_taken_is_refused():
    bare = Host(hide=FLOCK + PYTHONS)
    if shutil.which("python3", path="/usr/bin:/bin") not in PYTHONS + [None]:
        pytest.fail("a python3 outside the hidden list is on /usr/bin:/bin")
    # the hidden files still exist (not executable): sh finds python3, which cannot start
    with pytest.raises(runlock.HostBusy, match=r"cannot take the run lock on h1: (neither flock\(1\) nor python3 "
                                               r"on the host|python3 on the host could not take the lock \(rc 126\));"
                                               r" nothing was run there"):
        runlock.acquire(bare, "run-A")
