"""The run's first payload rides on the run lock's own channel, over real SSH to lab hosts: the
lock is held exactly as when it is taken alone (a second run is refused naming the holder, the
lock goes when the run closes it), the payload's result is the one a channel of its own gives,
and nothing the payload leaves running keeps the lock or the channel's stdin; the payload sees the
login shell's own environment and no descriptor of the lock's. A busy host runs
nothing; a payload that times out takes the lock with it, and the next command takes it again."""
from __future__ import annotations

import os
import time

import pytest

from fleetops.engine import payload
from fleetops.engine.connection import runlock
from fleetops.engine.connection.runlock import HostBusy
from fleetops.engine.connection.ssh import SSHTransport
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.lab

ECHO = "import sys\ndef main(args):\n    sys.stdout.write('stray output, no newline')\n    return {'echo': args}\n"
BOOM = "def main(args):\n    raise ValueError('boom ' + args['word'])\n"
TOUCH = "import os\ndef main(args):\n    open(os.path.expanduser('~/ran-' + args['id']), 'w').close()\n    return {}\n"
ENV = ("import os\ndef main(args):\n"
       "    return {'path': os.environ.get('PATH'), 'env': sorted(os.environ),\n"
       "            'fds': sorted(int(f) for f in os.listdir('/proc/self/fd') if int(f) > 2)}\n")
SLOW = "import time\ndef main(args):\n    time.sleep(20)\n    return {}\n"
SPAWN = ("import os, subprocess\ndef main(args):\n"
         "    p = subprocess.Popen(['sleep', '30'], start_new_session=True, stdout=subprocess.DEVNULL,\n"
         "                         stderr=subprocess.DEVNULL)\n"
         "    return {'pid': p.pid}\n")


def _call(source: str, args: dict):
    """(command, stdin line, marker) of a one-module payload, as run_modules builds them."""
    marker = "--m-%d--" % time.monotonic_ns()
    line = payload.encode_input({"fleetops.remote.t": source}, "fleetops.remote.t", args)
    command, _tried = payload.build_command(marker)
    return command, line, marker


def _parse(res, marker):
    return payload._parse(res, marker, "t", ["python3"], 10)


@pytest.fixture
def conns(lab):
    made = []

    def connect(i=0):
        t = SSHTransport(lab.ssh_params(lab.hosts[i]))
        t.connect()
        made.append(t)
        return t
    yield connect
    for t in made:
        t.close()


@pytest.mark.parametrize("source, args", [(ECHO, {"a": [1, "é"]}), (BOOM, {"word": "x"}), (ENV, {})],
                         ids=["result", "traceback", "environment and descriptors"])
def test_the_result_is_the_one_a_channel_of_its_own_gives(conns, source, args):
    command, line, marker = _call(source, args)
    alone = _parse(conns().run(command, stdin=line), marker)
    lock, res = runlock.acquire_running(conns(), "run-a", command, line, 30)
    try:
        assert lock is not None
        rode = _parse(res, marker)
        alone.pop("payload_seconds", None)
        assert rode == alone
        assert res.rc == (1 if source is BOOM else 0)
    finally:
        lock.close()


def test_the_lock_is_held_and_released_as_when_taken_alone(conns):
    command, line, _ = _call(ECHO, {})
    lock, _res = runlock.acquire_running(conns(), "run-a", command, line, 30)
    with pytest.raises(HostBusy) as exc:
        runlock.acquire(conns(), "run-b")
    assert "run run-a" in str(exc.value)
    assert runlock.acquire_running(conns(), "run-a", command, line, 30) == (None, None)   # the same run
    lock.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            again = runlock.acquire(conns(), "run-b")
            break
        except HostBusy:
            assert time.monotonic() < deadline, "the lock outlived its channel"
            time.sleep(0.1)
    again.close()


def test_a_busy_host_runs_nothing(conns, lab):
    held = runlock.acquire(conns(), "run-a")
    try:
        command, line, _ = _call(TOUCH, {"id": "busy"})
        with pytest.raises(HostBusy):
            runlock.acquire_running(conns(), "run-b", command, line, 30)
        assert not os.path.exists(os.path.join(lab.hosts[0]["home"], "ran-busy"))
    finally:
        held.close()


def test_a_timed_out_payload_takes_the_lock_with_it(conns):
    command, line, _ = _call(SLOW, {})
    lock, res = runlock.acquire_running(conns(), "run-a", command, line, 1)
    assert lock is None and res.timed_out
    again = runlock.acquire(conns(), "run-b")         # free at once: the sleeping payload never held it
    again.close()


def test_what_the_payload_leaves_running_holds_neither_lock_nor_stdin(conns):
    command, line, marker = _call(SPAWN, {})
    lock, res = runlock.acquire_running(conns(), "run-a", command, line, 30)
    pid = _parse(res, marker)["pid"]
    try:
        assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
        assert all(os.readlink(f"/proc/{pid}/fd/{fd}") != os.path.dirname(os.readlink(f"/proc/{pid}/cwd"))
                   for fd in os.listdir(f"/proc/{pid}/fd"))
        lock.close()
        again = None
        deadline = time.monotonic() + 10
        while again is None:
            try:
                again = runlock.acquire(conns(), "run-b")
            except HostBusy:
                assert time.monotonic() < deadline, "a process the payload started kept the run lock"
                time.sleep(0.1)
        again.close()
    finally:
        os.kill(pid, 9)


class Counting(SSHTransport):
    sessions: list = []

    def start(self, command):
        Counting.sessions.append(("start", self.params.name))
        return super().start(command)

    def run(self, command, stdin=None, timeout=None, max_output=None):
        # the host's session takes the lock through start(); run() carries only later commands
        Counting.sessions.append(("run", self.params.name))
        return super().run(command, stdin=stdin, timeout=timeout, max_output=max_output)


def test_a_play_opens_one_channel_for_the_lock_and_its_first_payload(lab, tmp_path):
    Counting.sessions = []
    hosts = lab.hosts[:2]
    outcome, rec = run_yaml(tmp_path, """
        - hosts: all
          gather_facts: false
          tasks:
            - python:
                payload: sqlite_version
            - command: id -un
        """, inventory=open(lab.inventory_path).read(), transport_factory=Counting, limit=",".join(
        h["name"] for h in hosts))
    results = [(h, r.get("failed"), r.get("msg")) for h, _p, _t, _n, _m, r, *_ in rec.of("host_result")]
    assert all(not failed for _h, failed, _msg in results), results
    for h in hosts:
        assert [kind for kind, name in Counting.sessions if name == h["name"]] == ["start", "run"]
