"""SSHTransport against real OpenSSH sshd lab hosts: auth, host keys, commands, faults."""
import base64
import dataclasses
import os
import shlex
import shutil
import socket
import stat
import subprocess
import time
import uuid

import paramiko
import pytest

from fleetops.engine.connection.become import become_wrap
from fleetops.engine.connection.hostkeys import fingerprint, known_hosts_name
from fleetops.engine.connection.keys import check_private_key
from fleetops.engine.connection.output import Capped
from fleetops.engine.connection.ssh import SSHTransport
from fleetops.errors import BadInput, Unreachable
from tests.support.own_sshd import own_sshd
from tests.support.ssh_keys import authorized_key, ssh_agent

def _read(path):
    with open(path) as f:
        return f.read()


def _readb(path):
    with open(path, "rb") as f:
        return f.read()


pytestmark = pytest.mark.lab


def _host(lab, i):
    """Lab host i; a lab too small for the test fails it with the remedy, not an IndexError."""
    if i >= len(lab.hosts):
        pytest.fail(f"this test uses lab host {i}: run with FLEETOPS_LAB_HOSTS >= {i + 1} (the lab has {len(lab.hosts)})")
    return lab.hosts[i]


def _params(lab, i=0, **kw):
    return dataclasses.replace(lab.ssh_params(_host(lab, i)), **kw)


def _host_pub(h):
    typ, b64 = _read(h["host_key"] + ".pub").split()[:2]
    return typ, b64


@pytest.fixture
def conn(lab):
    t = SSHTransport(_params(lab))
    t.connect()
    yield t
    t.close()


def _keygen(path, passphrase="", typ="ed25519"):
    subprocess.run(["ssh-keygen", "-q", "-t", typ, "-N", passphrase, "-f", str(path)], check=True)
    return str(path)


def test_each_host_runs_as_its_own_user(lab):
    for h in lab.hosts:
        t = SSHTransport(lab.ssh_params(h["name"]))
        try:
            t.connect()
            r = t.run('whoami; printf "%s\\n" "$HOME"; printf "%s\\n" "$HERMES_DISABLE_LAZY_INSTALLS"')
        finally:
            t.close()
        assert r.rc == 0, r.stderr
        assert r.stdout.decode().splitlines() == [h["user"], h["home"], "1"]


def test_connection_prefers_aead_and_disables_nagle(conn):
    """AES-GCM as OpenSSH orders it (no per-packet Python HMAC check on the controller), and
    TCP_NODELAY (a payload's stdin line and its EOF are not held ~40 ms by Nagle)."""
    assert conn._t.remote_cipher == conn._t.local_cipher == "aes128-gcm@openssh.com"
    assert conn._t.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_stdin_binary_roundtrip(conn):
    big = os.urandom(3 * 1024 * 1024) + bytes(range(256))   # > 1 MiB: fed from a thread
    r = conn.run("cat", stdin=big)
    assert r.rc == 0 and r.stdout == big
    small = bytes(range(256)) * 4
    r = conn.run("cat", stdin=small)
    assert r.stdout == small
    assert conn.run("cat").stdout == b""          # no stdin: EOF at once, no hang


def test_exit_codes_and_streams(conn):
    r = conn.run("echo out; echo err >&2; exit 7")
    assert (r.rc, r.stdout, r.stderr, r.timed_out) == (7, b"out\n", b"err\n", False)
    assert conn.run("true").rc == 0
    assert conn.run("false").rc == 1
    r = conn.run("printf '\\377\\376 not utf-8'")
    assert r.stdout == b"\xff\xfe not utf-8"


def test_timeout_returns_and_stops_the_command(lab, conn):
    tag = f"{uuid.uuid4().int % 1000}.{os.getpid() % 1000}"
    r = conn.run(f"sleep 3{tag}; echo late", timeout=1)
    assert r.timed_out and r.rc == -1 and b"late" not in r.stdout
    assert conn.run("echo again").stdout == b"again\n"      # connection still usable
    user = lab.hosts[0]["user"]
    for _ in range(100):                                     # the remote sleep got the signal
        if subprocess.run(["pgrep", "-u", user, "-f", f"sleep 3{tag}"], capture_output=True).returncode:
            break
        time.sleep(0.1)
    else:
        pytest.fail("timed-out remote command is still running")


def test_hostile_argument_reaches_host_as_data(conn):
    pwned = f"/tmp/pwned-{uuid.uuid4().hex}"
    evil = f"$(touch {pwned})`touch {pwned}`'\"\n--help -rf ;|&><* ${{HOME}} \\"
    r = conn.run(f"printf '%s' {shlex.quote(evil)}")
    assert r.stdout.decode() == evil
    r = conn.run(f"printf '%s\\n' -- {shlex.quote('--' + evil)} | wc -l")
    assert r.rc == 0
    # through become's extra sh -c layer, with a stand-in sudo (the lab has none)
    inner = f"printf '%s' {shlex.quote(evil)}"
    r = conn.run('sudo() { shift 5; "$@"; }; ' + become_wrap(inner, "nobody"))
    assert r.stdout.decode() == evil
    assert not os.path.exists(pwned)


def test_unknown_host_key_refused_then_accepted_and_recorded(lab, tmp_path):
    h = lab.hosts[1]
    kh = tmp_path / "ssh" / "known_hosts"
    typ, b64 = _host_pub(h)
    fp = fingerprint(base64.b64decode(b64))
    marker = f"/tmp/fo-ran-{uuid.uuid4().hex}"
    t = SSHTransport(_params(lab, 1, known_hosts=str(kh)))
    with pytest.raises(Unreachable) as ei:
        t.connect()
    msg = str(ei.value)
    assert msg == (f"host key for [127.0.0.1]:{h['port']} is not in known_hosts ({typ} {fp}); "
                   f"add it, or run with --accept-new-host-keys")
    with pytest.raises(Unreachable):
        t.run(f"touch {marker}")
    assert not os.path.exists(marker)
    assert not kh.exists()

    t = SSHTransport(_params(lab, 1, known_hosts=str(kh), accept_new_host_keys=True))
    t.connect()
    assert t.run("whoami").stdout.decode().strip() == h["user"]
    t.close()
    assert kh.read_text() == f"[127.0.0.1]:{h['port']} {typ} {b64}\n"
    assert stat.S_IMODE(kh.stat().st_mode) == 0o600

    t = SSHTransport(_params(lab, 1, known_hosts=str(kh)))   # now known: strict mode connects
    t.connect()
    assert t.run("true").rc == 0
    t.close()


def test_hashed_known_hosts_entry(lab, tmp_path):
    h = lab.hosts[2]
    typ, b64 = _host_pub(h)
    kh = tmp_path / "known_hosts"
    hashed = paramiko.HostKeys.hash_host(known_hosts_name("127.0.0.1", h["port"]))
    kh.write_text(f"# comment\n{hashed} {typ} {b64}\n")
    t = SSHTransport(_params(lab, 2, known_hosts=str(kh)))
    t.connect()
    assert t.run("true").rc == 0
    t.close()


def test_changed_host_key_refused_even_with_accept_new(lab, tmp_path):
    h = lab.hosts[0]
    other = _keygen(tmp_path / "otherkey")
    otyp, ob64 = _read(other + ".pub").split()[:2]
    kh = tmp_path / "known_hosts"
    content = f"[127.0.0.1]:{h['port']} {otyp} {ob64}\n"
    kh.write_text(content)
    _, real = _host_pub(h)
    b64d = base64.b64decode
    t = SSHTransport(_params(lab, 0, known_hosts=str(kh), accept_new_host_keys=True))
    marker = f"/tmp/fo-ran-{uuid.uuid4().hex}"
    with pytest.raises(Unreachable) as ei:
        t.connect()
    assert str(ei.value) == (f"HOST KEY CHANGED for [127.0.0.1]:{h['port']}: known_hosts has "
                             f"{fingerprint(b64d(ob64))}, host offers {fingerprint(b64d(real))}; "
                             f"refusing to connect")
    with pytest.raises(Unreachable):
        t.run(f"touch {marker}")
    assert not os.path.exists(marker)
    assert kh.read_text() == content


def test_revoked_host_key_refused(lab, tmp_path):
    h = lab.hosts[0]
    typ, b64 = _host_pub(h)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{h['port']} {typ} {b64}\n@revoked * {typ} {b64}\n")
    with pytest.raises(Unreachable, match="revoked"):
        SSHTransport(_params(lab, 0, known_hosts=str(kh))).connect()


def test_server_is_asked_for_the_key_type_known_hosts_has(lab, tmp_path):
    """A host with ed25519 and RSA keys, known only by RSA: must negotiate RSA, not cry 'changed'."""
    h = lab.hosts[3]
    ed = _keygen(tmp_path / "hk_ed25519")
    rsa = _keygen(tmp_path / "hk_rsa", typ="rsa")
    for p in (ed, rsa):
        os.chmod(p, 0o600)
    with own_sshd(h, tmp_path, lambda text: text.replace(f"HostKey {h['host_key']}",
                                                         f"HostKey {ed}\nHostKey {rsa}")) as port:
        kh = tmp_path / "known_hosts"
        rtyp, rb64 = _read(rsa + ".pub").split()[:2]
        kh.write_text(f"[127.0.0.1]:{port} {rtyp} {rb64}\n")
        t = SSHTransport(_params(lab, 3, port=port, known_hosts=str(kh)))
        t.connect()
        assert t._t.get_remote_server_key().get_name() == "ssh-rsa"
        assert t.run("whoami").stdout.decode().strip() == h["user"]
        t.close()
        etyp, eb64 = _read(ed + ".pub").split()[:2]
        kh.write_text(f"[127.0.0.1]:{port} {etyp} {eb64}\n")
        t = SSHTransport(_params(lab, 3, port=port, known_hosts=str(kh)))
        t.connect()
        assert t._t.get_remote_server_key().get_name() == "ssh-ed25519"
        t.close()


def test_private_key_checks(lab, tmp_path, monkeypatch):
    good = tmp_path / "good"
    shutil.copy(lab.key_path, good)
    os.chmod(good, 0o600)
    assert check_private_key(str(good)) is None
    loose = tmp_path / "loose"
    shutil.copy(lab.key_path, loose)
    os.chmod(loose, 0o644)
    with pytest.raises(BadInput) as ei:
        check_private_key(str(loose))
    assert str(ei.value) == (f"private key {loose} has mode 0644; ssh refuses keys readable by others: "
                             f"chmod 600 {loose}")
    os.chmod(loose, 0o640)
    with pytest.raises(BadInput, match="mode 0640"):
        check_private_key(str(loose))
    with pytest.raises(BadInput, match="does not exist"):
        check_private_key(str(tmp_path / "nope"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    enc = _keygen(tmp_path / "enc", passphrase="s3cret-passphrase")
    with pytest.raises(BadInput) as ei:
        check_private_key(enc)
    assert "encrypted" in str(ei.value) and "ssh-agent" in str(ei.value)
    assert "s3cret" not in str(ei.value)
    junk = tmp_path / "junk"
    junk.write_text("not a key\n")
    os.chmod(junk, 0o600)
    with pytest.raises(BadInput, match="cannot be read"):
        check_private_key(str(junk))


def test_unauthorised_key_is_unreachable(lab, tmp_path):
    stranger = _keygen(tmp_path / "stranger")
    t = SSHTransport(_params(lab, 0, key_file=stranger))
    with pytest.raises(Unreachable) as ei:
        t.connect()
    assert str(ei.value).startswith(f"127.0.0.1:{lab.hosts[0]['port']}: authentication failed for user "
                                    f"{lab.hosts[0]['user']}")


def test_closed_port_is_refused_not_timed_out(lab):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # a long connect timeout: a "refused" message proves we did not wait for it
    t = SSHTransport(_params(lab, 0, port=port, connect_timeout=60))
    with pytest.raises(Unreachable) as ei:
        t.connect()
    assert str(ei.value) == f"127.0.0.1:{port}: connection refused"


def test_listener_that_never_speaks_ssh(lab):
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(5)
        port = srv.getsockname()[1]
        t = SSHTransport(_params(lab, 0, port=port, connect_timeout=0.5))
        with pytest.raises(Unreachable) as ei:
            t.connect()
    assert str(ei.value).startswith(f"127.0.0.1:{port}: no SSH banner within 0.5s")


def test_dropped_connection_raises_unreachable(lab):
    t = SSHTransport(_params(lab, 4))
    t.connect()
    with pytest.raises(Unreachable, match="connection lost"):
        t.run("kill -9 $PPID; sleep 5")      # kills this session's sshd process
    t.close()


def test_proxy_jump_one_hop(lab):
    jump = lab.hosts[0]
    t = SSHTransport(_params(lab, 5, proxy_jump=f"{jump['user']}@127.0.0.1:{jump['port']}"))
    t.connect()
    try:
        assert t.run("whoami").stdout.decode().strip() == _host(lab, 5)["user"]
    finally:
        t.close()


def test_get_file_over_sftp(conn, lab, tmp_path):
    data = bytes(range(256)) * 300
    r = conn.run("cat > ~/.fleetops-test-get.bin", stdin=data)
    assert r.rc == 0
    dst = tmp_path / "got.bin"
    conn.get_file(os.path.join(lab.hosts[0]["home"], ".fleetops-test-get.bin"), str(dst))
    assert dst.read_bytes() == data
    with pytest.raises(FileNotFoundError):
        conn.get_file("/nonexistent/file", str(tmp_path / "x"))
    conn.run("rm -f ~/.fleetops-test-get.bin")


def test_capped_stream_keeps_head():
    c = Capped(10)
    for chunk in (b"12345", b"67890abc", b"def"):
        c.add(chunk)
    assert c.value() == b"1234567890" and c.dropped == 6


def test_encrypted_key_through_ssh_agent(lab, tmp_path, monkeypatch):
    """An encrypted key file is usable when an agent holds it: the agent's matching key signs."""
    h = _host(lab, 6)
    plain = _keygen(tmp_path / "plain")
    enc = tmp_path / "enc"
    shutil.copy(plain, enc)
    shutil.copy(plain + ".pub", str(enc) + ".pub")
    os.chmod(enc, 0o600)
    subprocess.run(["ssh-keygen", "-q", "-p", "-f", str(enc), "-P", "", "-N", "pass-phrase"], check=True)
    pub = _read(plain + ".pub").strip()
    with authorized_key(h, pub), ssh_agent(tmp_path) as sock:
        monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
        with pytest.raises(BadInput, match="encrypted"):
            check_private_key(str(enc))
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        subprocess.run(["ssh-add", "-q", plain], check=True, env=dict(os.environ, SSH_AUTH_SOCK=sock),
                       capture_output=True)
        check_private_key(str(enc))                  # agent available: accepted
        t = SSHTransport(_params(lab, 6, key_file=str(enc)))
        t.connect()
        assert t.run("whoami").stdout.decode().strip() == h["user"]
        t.close()
        t = SSHTransport(_params(lab, 6, key_file=None))   # no key file: agent keys are tried
        t.connect()
        t.close()


def test_commands_run_when_descriptors_pass_fd_setsize(lab):
    """At fleet scale the controller holds a connection per host: its descriptors pass 1024,
    where select() refuses them. A command on a channel numbered above that still runs."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.fail(f"this machine's hard descriptor limit ({hard}) is below what the fleet-scale case needs")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1400), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        t = SSHTransport(_params(lab))
        t.connect()
        try:
            r = t.run("echo scale")
            assert r.rc == 0 and r.stdout == b"scale\n"
        finally:
            t.close()
    finally:
        for fd in filler:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
