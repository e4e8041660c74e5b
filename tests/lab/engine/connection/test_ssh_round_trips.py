"""SSHTransport's round trips, counted through the lab's delay proxy (fleetops/lab/delay.py).

Real hosts are 30-150 ms away, where round trips decide. The proxy counts the exchange's causal
depth (by the order of what it forwards, not by time), so these are counts, never durations:
version+kex 2, public-key auth 1 (the signed request sent at once), every command 2 (its
channel opened, then exec, whose reply is not waited for), 3 with stdin (sshd opens the window
at exec).
"""
import dataclasses
import os
import socket
import subprocess

import paramiko
import pytest

from fleetops.engine.connection.session import HostSession
from fleetops.engine.connection.ssh import SSHTransport
from fleetops.lab.delay import DelayProxy
from tests.support.own_sshd import own_sshd
from tests.support.ssh_keys import authorized_key, ssh_agent

pytestmark = pytest.mark.lab

ONE_WAY = 0.02          # each chunk held 20 ms each way: far above what the peers take to answer


def _read(path):
    with open(path) as f:
        return f.read()


@pytest.fixture
def proxied(lab, tmp_path):
    """(proxy, name, params): lab host 0 behind the delay proxy, known_hosts naming the proxy's port."""
    h = lab.hosts[0]
    with DelayProxy({h["name"]: h["port"]}, ONE_WAY) as proxy:
        port = proxy.ports[h["name"]]
        typ, b64 = _read(h["host_key"] + ".pub").split()[:2]
        kh = tmp_path / "known_hosts"
        kh.write_text(f"[127.0.0.1]:{port} {typ} {b64}\n")
        yield proxy, h["name"], dataclasses.replace(lab.ssh_params(h), port=port, known_hosts=str(kh))


def _kex_trips(proxy, name, params) -> int:
    """Round trips of a bare paramiko handshake (version exchange and key exchange, no auth)."""
    before = proxy.trips(name)
    t = paramiko.Transport(socket.create_connection((params.address, params.port)))
    try:
        t.start_client(timeout=10)
        return proxy.trips(name) - before
    finally:
        t.close()


def test_auth_costs_one_round_trip_after_the_key_exchange(proxied):
    proxy, name, params = proxied
    kex = _kex_trips(proxy, name, params)
    assert kex == 2
    t = SSHTransport(params)
    before = proxy.trips(name)
    t.connect()
    try:
        assert t._t.is_authenticated()
        assert proxy.trips(name) - before == kex + 1
    finally:
        t.close()


def test_each_command_costs_its_channel_and_its_exec(proxied):
    proxy, name, params = proxied
    t = SSHTransport(params)
    t.connect()
    try:
        costs, outputs = [], []
        for cmd, stdin in (("echo one", None), ("echo two", None), ("cat", b"three\n"), ("echo four", None)):
            before = proxy.trips(name)
            r = t.run(cmd, stdin=stdin)
            costs.append(proxy.trips(name) - before)
            outputs.append((r.rc, r.stdout))
    finally:
        t.close()
    assert outputs == [(0, b"one\n"), (0, b"two\n"), (0, b"three\n"), (0, b"four\n")]
    # each opens its channel, then execs; stdin waits for the window sshd opens at exec
    assert costs == [2, 2, 3, 2]


def test_commands_after_the_run_lock_cost_two_round_trips_each(proxied):
    proxy, name, params = proxied
    s = HostSession(SSHTransport(params), run_id=f"round-trips-{os.getpid()}")
    s.connect()
    try:
        costs = []
        for i in range(3):
            before = proxy.trips(name)
            assert s.run(f"echo {i}").stdout == f"{i}\n".encode()
            costs.append(proxy.trips(name) - before)
    finally:
        s.close()
    assert costs == [4, 2, 2]       # the lock's channel and its answer, then each command's channel and exec


def _keygen(path, typ="ed25519"):
    subprocess.run(["ssh-keygen", "-q", "-t", typ, "-N", "", "-f", str(path)], check=True)
    return str(path)


def test_an_rsa_key_and_a_refused_key_before_the_right_one_still_authenticate(lab, tmp_path, monkeypatch):
    """An RSA key signs with the algorithm the server lists; after a key the server refuses to
    take at once, the next ones take paramiko's usual path and the right one gets in."""
    h = lab.hosts[6]
    rsa = _keygen(tmp_path / "rsa", typ="rsa")
    stranger = _keygen(tmp_path / "stranger")
    pub = _read(rsa + ".pub").strip()
    with authorized_key(h, pub), ssh_agent(tmp_path) as sock:
        t = SSHTransport(dataclasses.replace(lab.ssh_params(h), key_file=rsa))
        t.connect()
        assert t.run("whoami").stdout.decode().strip() == h["user"]
        t.close()
        env = dict(os.environ, SSH_AUTH_SOCK=sock)
        for key in (stranger, rsa):                      # the agent offers the stranger first
            subprocess.run(["ssh-add", "-q", key], check=True, env=env, capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        t = SSHTransport(dataclasses.replace(lab.ssh_params(h), key_file=None))
        t.connect()
        assert t.run("whoami").stdout.decode().strip() == h["user"]
        t.close()


def test_a_host_allowing_two_sessions_runs_every_command(lab, tmp_path):
    """With MaxSessions 2 (sshd frees a closed session only after reading what came with its
    close), commands in quick turn, one with stdin, each still get their channel."""
    h = lab.hosts[3]
    with own_sshd(h, tmp_path, lambda text: text.replace("MaxSessions 200", "MaxSessions 2")) as port:
        typ, b64 = _read(h["host_key"] + ".pub").split()[:2]
        kh = tmp_path / "known_hosts"
        kh.write_text(f"[127.0.0.1]:{port} {typ} {b64}\n")
        t = SSHTransport(dataclasses.replace(lab.ssh_params(h), port=port, known_hosts=str(kh)))
        t.connect()
        try:
            got = [t.run(f"echo {i}").stdout for i in range(6)]
            got.append(t.run("cat", stdin=b"in\n").stdout)
        finally:
            t.close()
        assert got == [f"{i}\n".encode() for i in range(6)] + [b"in\n"]
