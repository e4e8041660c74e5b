"""LocalTransport: same contract as SSH, on the controller."""
import os
import shlex
import uuid

import pytest

import fleetops.engine.connection.local as local_mod
from fleetops.engine.connection.local import LocalTransport
from fleetops.engine.connection.become import become_wrap


@pytest.fixture
def t():
    tr = LocalTransport()
    tr.connect()
    yield tr
    tr.close()


def test_output_and_exit_code(t):
    r = t.run("echo out; echo err >&2; exit 7")
    assert (r.rc, r.stdout, r.stderr, r.timed_out) == (7, b"out\n", b"err\n", False)
    assert t.run("true").rc == 0


def test_stdin_binary_roundtrip(t):
    data = os.urandom(3 * 1024 * 1024) + bytes(range(256))
    r = t.run("cat", stdin=data)
    assert r.rc == 0 and r.stdout == data


def test_stdin_not_read_is_not_an_error(t):
    r = t.run("echo done", stdin=os.urandom(2 * 1024 * 1024))
    assert r.rc == 0 and r.stdout == b"done\n"


def test_timeout_kills_the_whole_group(t, tmp_path):
    flag = tmp_path / "late"
    r = t.run(f"sleep 30 & sleep 30; touch {shlex.quote(str(flag))}", timeout=0.5)
    assert r.timed_out and r.rc == -1
    assert b"timed out" in r.stderr
    assert not flag.exists()
    assert t.run("echo again").stdout == b"again\n"


def test_hostile_argument_is_data(t, tmp_path):
    pwned = tmp_path / f"pwned-{uuid.uuid4().hex}"
    evil = f"$(touch {pwned})`touch {pwned}`'\"\n--help -rf ;|&><* ${{HOME}}"
    r = t.run(f"printf '%s' {shlex.quote(evil)}")
    assert r.stdout.decode() == evil
    assert not pwned.exists()


def test_become_wrap_quoting_survives_a_shell(t, tmp_path):
    pwned = tmp_path / "pwned"
    evil = f"$(touch {pwned}) 'q' \"d\"\n-x"
    inner = f"printf '%s' {shlex.quote(evil)}"
    wrapped = become_wrap(inner, "some user")
    assert wrapped.startswith("sudo -n -H -u 'some user' -- sh -c ")
    assert become_wrap(inner, None) == inner
    # stand-in sudo that drops its 5 option words and runs the rest, to prove the quoting
    r = t.run('sudo() { shift 5; "$@"; }; ' + wrapped)
    assert r.rc == 0 and r.stdout.decode() == evil
    assert not pwned.exists()


def test_output_cap(t, monkeypatch):
    monkeypatch.setattr(local_mod, "MAX_STREAM", 1000)
    r = t.run("head -c 5000 /dev/zero")
    assert r.rc == 0 and r.stdout == b"\0" * 1000
    assert b"stdout truncated" in r.stderr and b"4000 more bytes" in r.stderr


def test_get_file(t, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(bytes(range(256)) * 10)
    dst = tmp_path / "dst.bin"
    t.get_file(str(src), str(dst))
    assert dst.read_bytes() == src.read_bytes()
    with pytest.raises(FileNotFoundError):
        t.get_file(str(tmp_path / "missing"), str(tmp_path / "x"))
    assert not (tmp_path / "x.part").exists()
