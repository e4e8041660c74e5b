"""A host's session takes the run lock with its first command itself: the lock command runs in a
real sh (as a host's sshd would start it) holding a real flock(1) on a real home directory; a
second session on that home is refused, names the holder, closes its connection, and stays
refused without asking again; a transport without channels (the controller) takes no lock."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

from fleetops.engine.connection import runlock
from fleetops.engine.connection.local import LocalTransport
from fleetops.engine.connection.runlock import HostBusy
from fleetops.engine.connection.session import HostSession
from fleetops.engine.connection.transport import CommandResult, ConnParams, Transport

pytestmark = pytest.mark.skipif(not shutil.which("flock"), reason="needs flock(1) for the host's lock")


class ShChannel:
    """A started command's channel, over a local `sh -c` with its own HOME."""

    def __init__(self, command: str, home: str):
        self.proc = subprocess.Popen(["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "HOME": home})
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.timeout = 1.0

    def settimeout(self, t):
        self.timeout = t

    def recv(self, n):
        end = time.monotonic() + (self.timeout or 1.0)
        while True:
            try:
                return os.read(self.proc.stdout.fileno(), n)
            except BlockingIOError:
                if time.monotonic() > end:
                    raise socket.timeout() from None
                time.sleep(0.01)

    def shutdown_write(self):
        if not self.proc.stdin.closed:
            self.proc.stdin.close()

    def close(self):
        self.shutdown_write()
        self.proc.wait(timeout=30)


class ShHost(Transport):
    """A host whose channels are local sh processes in `home`; run() records what it ran."""

    def __init__(self, home: str):
        self.params = ConnParams(name="h1", address="127.0.0.1", command_timeout=20)
        self.home = home
        self.log: list = []
        self.chans: list = []

    def connect(self):
        self.log.append("connect")

    def run(self, command, stdin=None, timeout=None, max_output=None):
        self.log.append(("run", command, [c.proc.poll() for c in self.chans]))
        return CommandResult(rc=0, stdout=b"", stderr=b"")

    def start(self, command):
        self.log.append("start")
        ch = ShChannel(command, self.home)
        self.chans.append(ch)
        return ch

    def get_file(self, remote_path, local_path):
        raise AssertionError("not used")

    def close(self):
        self.log.append("close")


def test_the_first_command_takes_the_lock_and_a_second_run_is_refused(tmp_path):
    home = str(tmp_path)
    first = HostSession(ShHost(home), "run-A")
    first.connect()
    assert first.lock is None                         # connecting takes nothing yet
    first.run("true")
    assert first.transport.log[:2] == ["connect", "start"]
    assert first.transport.log[2][:2] == ("run", "true") and first.transport.log[2][2] == [None]   # held
    assert first.lock is not None
    first.run("true")
    assert first.transport.log.count("start") == 1    # once per session

    second = HostSession(ShHost(home), "run-B")
    second.connect()
    with pytest.raises(HostBusy, match="another fleetops run holds its run lock .*run run-A"):
        second.run("true")
    assert second.busy and "close" in second.transport.log
    assert not [e for e in second.transport.log if isinstance(e, tuple)]   # nothing ran there
    with pytest.raises(HostBusy):
        second.connect()                              # refused for the rest of the run
    starts = second.transport.log.count("start")
    with pytest.raises(HostBusy):
        second.run("true")
    assert second.transport.log.count("start") == starts

    first.close()
    third = HostSession(ShHost(home), "run-C")
    third.run("true")                                 # released with the first session
    assert third.lock is not None
    third.close()


def test_the_same_run_under_another_name_holds_no_second_lock(tmp_path):
    one, other = HostSession(ShHost(str(tmp_path)), "run-A"), HostSession(ShHost(str(tmp_path)), "run-A")
    one.run("true")
    other.run("true")
    assert one.lock is not None and other.lock is None and not other.busy
    one.close()


def test_the_controller_takes_no_lock():
    session = HostSession(LocalTransport(ConnParams(name="localhost", address="127.0.0.1")), "run-A")
    session.connect()
    res = session.run_payload("cat", b"hello\n", timeout=10)
    assert (res.rc, res.stdout, session.lock) == (0, b"hello\n", None)
    assert runlock.acquire(session.transport, "run-A") is None
    session.close()
