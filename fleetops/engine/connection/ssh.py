"""SSH transport on paramiko, with OpenSSH's strict host key semantics.

A fleet tool that silently trusts a new or changed host key hands the fleet's
credentials to whoever answers first, so known_hosts is checked like
`StrictHostKeyChecking yes` (or `accept-new` with --accept-new-host-keys), and
paramiko's AutoAddPolicy is never used. One connection per host is reused by
every task of a run; each command gets its own exec channel.
"""
from __future__ import annotations

import base64
import fcntl
import getpass
import hashlib
import hmac
import logging
import os
import re
import select
import socket
import stat
import threading
import time
from typing import cast

import paramiko
from paramiko.common import cMSG_CHANNEL_REQUEST
from paramiko.message import Message

from fleetops.engine.connection.output import MAX_STREAM, READ_CHUNK, Capped, truncation_note
from fleetops.engine.connection.transport import CommandResult, ConnParams, Transport
from fleetops.errors import BadInput, Unreachable

# paramiko logs handshake failures with tracebacks; without a handler Python's
# last-resort handler would print them over the terminal view.
logging.getLogger("paramiko").addHandler(logging.NullHandler())
log = logging.getLogger("fleetops.ssh")

DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")

# known_hosts key type -> host key algorithms that prove possession of that key
_ALGS_FOR_TYPE = {
    "ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256"),
}


def known_hosts_name(address: str, port: int) -> str:
    """The name OpenSSH files a host under: `addr` on port 22, else `[addr]:port`."""
    return address if int(port) == 22 else f"[{address}]:{port}"


def fingerprint(key_blob: bytes) -> str:
    """OpenSSH-style SHA256 fingerprint of a public key blob."""
    digest = hashlib.sha256(key_blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _name_matches(pattern_field: str, name: str) -> bool:
    if pattern_field.startswith("|1|"):
        try:
            _, _, salt, want = pattern_field.split("|", 3)
            mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
            return hmac.compare_digest(mac, base64.b64decode(want))
        except (ValueError, TypeError):
            return False
    return name in pattern_field.split(",")


_parsed_cache: dict = {}
_cache_lock = threading.Lock()


def _file_stamp(path: str):
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _cached(kind: str, path: str, build):
    """build(path), remembered while the file's inode, size and mtime stay the same: a run opens
    one connection per host, and re-reading one known_hosts / key file for each of a thousand
    hosts is pure waste. A changed file (a key recorded by --accept-new-host-keys) is re-read."""
    stamp = _file_stamp(path)
    with _cache_lock:
        hit = _parsed_cache.get((kind, path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    value = build(path)
    with _cache_lock:
        _parsed_cache[(kind, path)] = (stamp, value)
    return value


def _parse_known_hosts(path: str) -> list:
    """[(marker or None, host field, key type, blob)] for every usable line."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    entries = []
    for line in lines:
        fields = line.strip().split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = None
        if fields[0].startswith("@"):
            marker, fields = fields[0], fields[1:]
        if len(fields) < 3:
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except (ValueError, TypeError):
            continue
        entries.append((marker, fields[0], fields[1], blob))
    return entries


def read_known_hosts(path: str, name: str) -> tuple[list[tuple[str, bytes]], list[bytes]]:
    """(known (keytype, blob) entries, revoked blobs) for `name`; hashed entries included."""
    known: list = []
    revoked: list = []
    try:
        entries = _cached("known_hosts", path, _parse_known_hosts)
    except FileNotFoundError:
        return known, revoked
    except OSError as e:
        raise Unreachable(f"cannot read known_hosts {path}: {e.strerror or e}")
    for marker, hosts, ktype, blob in entries:
        if marker == "@revoked":
            revoked.append(blob)
        elif marker is None and _name_matches(hosts, name):
            known.append((ktype, blob))
    return known, revoked


_AEAD = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _prefer_aead(t) -> None:
    """AES-GCM first, as OpenSSH's client orders it (after chacha20, which paramiko lacks):
    authenticated in C, where paramiko checks a CTR cipher's HMAC on every packet in a Python
    loop; about a tenth of the controller's CPU per connection. Same set of ciphers offered."""
    opts = t.get_security_options()
    have = tuple(opts.ciphers)
    first = tuple(c for c in _AEAD if c in have)
    opts.ciphers = first + tuple(c for c in have if c not in first)


def _open_agent():
    """(agent or None, its keys); the caller closes the agent once done signing."""
    if not os.environ.get("SSH_AUTH_SOCK"):
        return None, []
    try:
        agent = paramiko.Agent()
    except (paramiko.SSHException, OSError):
        return None, []
    keys = list(agent.get_keys())
    if not keys:
        agent.close()
        return None, []
    return agent, keys


def key_is_encrypted(path: str) -> bool:
    """True if a private key file needs a passphrase (OpenSSH or PEM format)."""
    with open(path, "rb") as f:
        text = f.read(1 << 20)
    if b"Proc-Type: 4,ENCRYPTED" in text or b"BEGIN ENCRYPTED PRIVATE KEY" in text:
        return True
    m = re.search(rb"-----BEGIN OPENSSH PRIVATE KEY-----(.*?)-----END", text, re.S)
    if m:
        try:
            raw = base64.b64decode(b"".join(m.group(1).split()))
        except ValueError:
            return False
        magic = b"openssh-key-v1\0"
        if raw.startswith(magic):
            n = int.from_bytes(raw[len(magic):len(magic) + 4], "big")
            return raw[len(magic) + 4:len(magic) + 4 + n] != b"none"
    return False


def load_private_key(path: str):
    """PKey from a file; PasswordRequiredException if it is encrypted (any paramiko version).
    Read once per run for all hosts (re-read if the file changes)."""
    return _cached("private_key", path, _load_private_key)


def _load_private_key(path: str):
    if key_is_encrypted(path):
        raise paramiko.PasswordRequiredException(f"private key {path} is encrypted")
    try:
        return paramiko.PKey.from_path(path)
    except TypeError as e:          # cryptography's "password-protected" on some versions
        if "password" in str(e).lower():
            raise paramiko.PasswordRequiredException(f"private key {path} is encrypted")
        raise paramiko.SSHException(str(e))


def check_private_key(path: str) -> None:
    """Refuse, before any host is contacted, a key ssh itself would refuse or could not use."""
    p = os.path.expanduser(path)
    if not os.path.exists(p):
        raise BadInput(f"private key {path} does not exist")
    if not os.path.isfile(p):
        raise BadInput(f"private key {path} is not a file")
    mode = stat.S_IMODE(os.stat(p).st_mode)
    if mode & 0o077:
        raise BadInput(f"private key {path} has mode {mode:04o}; ssh refuses keys readable by others: "
                       f"chmod 600 {path}")
    try:
        load_private_key(p)
    except paramiko.PasswordRequiredException:
        agent, keys = _open_agent()
        if agent is not None:
            agent.close()
        if not keys:
            raise BadInput(f"private key {path} is encrypted and no ssh-agent is available; "
                           f"load it with ssh-add, or use an unencrypted key")
    except (paramiko.SSHException, ValueError, OSError) as e:
        raise BadInput(f"private key {path} cannot be read: {e}")


def parse_jump(spec: str) -> tuple[str | None, str, int]:
    """`[user@]host[:port]` (host may be `[v6]`) -> (user, host, port)."""
    user = None
    if "@" in spec:
        user, spec = spec.rsplit("@", 1)
    port = 22
    if spec.startswith("["):
        host, _, rest = spec[1:].partition("]")
        if rest.startswith(":"):
            port = int(rest[1:])
    elif spec.count(":") == 1:
        host, p = spec.split(":")
        port = int(p)
    else:
        host = spec
    return user, host, port


class SSHTransport(Transport):
    """One paramiko connection to one host; commands run one at a time on exec channels."""

    def __init__(self, params: ConnParams):
        self.params = params
        self._t: paramiko.Transport | None = None
        self._jump: SSHTransport | None = None
        self._agent = None       # kept open while the connection may need agent signatures
        self._lock = threading.RLock()
        self.host_key_name = known_hosts_name(params.address, params.port)

    # ---- connection ------------------------------------------------------
    @property
    def where(self) -> str:
        p = self.params
        return f"{p.address}:{p.port}"

    @property
    def known_hosts_path(self) -> str:
        return os.path.expanduser(self.params.known_hosts or "~/.ssh/known_hosts")

    def connect(self) -> None:
        with self._lock:
            if self._t is not None and self._t.is_active():
                return
            self.close()
            try:
                self._connect()
            except Unreachable:
                self.close()
                raise
            except Exception as e:                      # pragma: no cover - safety net
                self.close()
                raise Unreachable(f"{self.where}: {type(e).__name__}: {e}")

    def _connect(self) -> None:
        p = self.params
        timeout = float(p.connect_timeout)
        sock = self._open_socket(timeout)
        t = paramiko.Transport(sock)
        self._t = t
        t.banner_timeout = timeout
        t.handshake_timeout = timeout
        t.auth_timeout = timeout
        known, revoked = read_known_hosts(self.known_hosts_path, self.host_key_name)
        known_types = sorted({kt for kt, _ in known})
        if known_types:
            algs = [a for kt in known_types for a in _ALGS_FOR_TYPE.get(kt, (kt,))]
            algs = [a for a in algs if a in t._key_info]
            if algs:
                # ask for exactly the key type(s) we can verify, as OpenSSH does
                t.get_security_options().key_types = algs
        _prefer_aead(t)
        try:
            # the banner/handshake timeouts fire first; this outer bound only guards a stall
            t.start_client(timeout=2 * timeout + 5)
        except paramiko.SSHException as e:
            msg = str(e)
            if "banner" in msg.lower():
                raise Unreachable(f"{self.where}: no SSH banner within {timeout:g}s (not an SSH server, "
                                  f"or it is overloaded)")
            if known_types and ("host key" in msg.lower() or "incompatible" in msg.lower()):
                raise Unreachable(f"{self.where}: host offers no host key of the type known_hosts has "
                                  f"for {self.host_key_name} ({', '.join(known_types)}); refusing to connect")
            raise Unreachable(f"{self.where}: SSH handshake failed: {msg}")
        except (EOFError, OSError) as e:
            raise Unreachable(f"{self.where}: connection closed during SSH handshake ({e or type(e).__name__})")
        if t.host_key is None:
            raise Unreachable(f"{self.where}: SSH handshake did not complete within {2 * timeout + 5:g}s")
        self._verify_host_key(t.host_key, known, revoked)
        self._auth(t)
        if p.keepalive:
            t.set_keepalive(int(p.keepalive))

    def _open_socket(self, timeout: float):
        p = self.params
        if p.extra.get("proxy_command"):
            return self._open_via_command(timeout)
        if p.proxy_jump:
            return self._open_via_jump(timeout)
        try:
            sock = socket.create_connection((p.address, int(p.port)), timeout=timeout)
        except socket.gaierror as e:
            raise Unreachable(f"{self.where}: cannot resolve {p.address}: {e.strerror or e}")
        except ConnectionRefusedError:
            raise Unreachable(f"{self.where}: connection refused")
        except (socket.timeout, TimeoutError):
            raise Unreachable(f"{self.where}: TCP connect timed out after {timeout:g}s")
        except OSError as e:
            raise Unreachable(f"{self.where}: {e.strerror or e}")
        # No Nagle: a payload's stdin line and the EOF after it are two small packets, and
        # Nagle holds the second until the host's delayed ACK (~40 ms per call). OpenSSH's
        # client disables it for the same reason.
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        return sock

    def _open_via_command(self, timeout: float):
        """ProxyCommand: the command's stdin/stdout are the connection (%h %p %r %% as in OpenSSH)."""
        p = self.params
        subs = {"h": str(p.address), "p": str(p.port), "r": str(p.user or getpass.getuser()), "%": "%"}
        cmd = re.sub(r"%(.)", lambda m: subs.get(m.group(1), m.group(0)), p.extra["proxy_command"])
        try:
            sock = paramiko.ProxyCommand(cmd)
        except (paramiko.SSHException, OSError) as e:
            raise Unreachable(f"{self.where}: ProxyCommand {cmd!r} failed to start: {e}")
        sock.settimeout(timeout)
        return sock

    def _open_via_jump(self, timeout: float):
        p = self.params
        try:
            juser, jhost, jport = parse_jump(p.proxy_jump or "")
        except ValueError:
            raise Unreachable(f"{self.where}: bad ProxyJump {p.proxy_jump!r} (want [user@]host[:port])")
        jp = ConnParams(name=jhost, address=jhost, port=jport, user=juser, key_file=p.key_file,
                        known_hosts=p.known_hosts, accept_new_host_keys=p.accept_new_host_keys,
                        connect_timeout=p.connect_timeout, keepalive=p.keepalive)
        self._jump = SSHTransport(jp)
        try:
            self._jump.connect()
        except Unreachable as e:
            raise Unreachable(f"{self.where}: jump host failed: {e}")
        try:
            return cast(paramiko.Transport, self._jump._t).open_channel("direct-tcpip", (p.address, int(p.port)),
                                              ("127.0.0.1", 0), timeout=timeout)
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise Unreachable(f"{self.where}: jump host {jp.address}:{jp.port} could not open a "
                              f"tunnel: {e}")

    def _verify_host_key(self, key, known, revoked) -> None:
        name = self.host_key_name
        blob, ktype = key.asbytes(), key.get_name()
        fp = fingerprint(blob)
        if blob in revoked:
            raise Unreachable(f"host key for {name} ({ktype} {fp}) is marked @revoked in known_hosts; "
                              f"refusing to connect")
        if any(kt == ktype and b == blob for kt, b in known):
            return
        if known:
            same = [b for kt, b in known if kt == ktype] or [known[0][1]]
            raise Unreachable(f"HOST KEY CHANGED for {name}: known_hosts has {fingerprint(same[0])}, "
                              f"host offers {fp}; refusing to connect")
        if not self.params.accept_new_host_keys:
            raise Unreachable(f"host key for {name} is not in known_hosts ({ktype} {fp}); add it, "
                              f"or run with --accept-new-host-keys")
        self._record_new_key(ktype, blob, fp)

    def _record_new_key(self, ktype: str, blob: bytes, fp: str) -> None:
        """Append under an exclusive lock, re-checking: another worker may have recorded it first."""
        path = self.known_hosts_path
        os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                known, _ = read_known_hosts(path, self.host_key_name)
                if any(kt == ktype and b == blob for kt, b in known):
                    return
                if known:
                    raise Unreachable(f"HOST KEY CHANGED for {self.host_key_name}: known_hosts has "
                                      f"{fingerprint(known[0][1])}, host offers {fp}; refusing to connect")
                f.seek(0, os.SEEK_END)
                lead = b""
                if f.tell() > 0:
                    f.seek(-1, os.SEEK_END)
                    lead = b"" if f.read(1) == b"\n" else b"\n"
                line = f"{self.host_key_name} {ktype} {base64.b64encode(blob).decode()}\n"
                f.write(lead + line.encode())
                f.flush()
                os.fsync(f.fileno())
                log.info("recorded new host key for %s (%s %s) in %s", self.host_key_name, ktype, fp, path)
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _candidate_keys(self):
        """(label, PKey) in order: key_file, else agent keys, else ~/.ssh default keys."""
        p = self.params
        if p.key_file:
            path = os.path.expanduser(p.key_file)
            try:
                yield path, load_private_key(path)
                return
            except paramiko.PasswordRequiredException:
                want = None
                try:
                    with open(path + ".pub") as f:
                        want = base64.b64decode(f.read().split()[1])
                except (OSError, IndexError, ValueError):
                    pass
                for k in self._agent_keys():
                    if want is None or k.asbytes() == want:
                        yield f"agent key for {path}", k
                return
            except (paramiko.SSHException, ValueError, OSError) as e:
                raise Unreachable(f"{self.where}: cannot load private key {path}: {e}")
        if not p.extra.get("identities_only"):        # IdentitiesOnly: the identity files, no agent
            for i, k in enumerate(self._agent_keys()):
                yield f"agent key {i + 1}", k
        for name in DEFAULT_KEYS:
            path = os.path.expanduser(f"~/.ssh/{name}")
            if os.path.exists(path):
                try:
                    yield path, load_private_key(path)
                except (paramiko.SSHException, ValueError, OSError):
                    continue

    def _agent_keys(self) -> list:
        if self._agent is None:
            self._agent, keys = _open_agent()
            return keys
        return list(self._agent.get_keys())

    def _auth(self, t: paramiko.Transport) -> None:
        user = self.params.user or getpass.getuser()
        tried = []
        for label, key in self._candidate_keys():
            tried.append(label)
            try:
                t.auth_publickey(user, key)
            except paramiko.AuthenticationException:
                continue
            except (paramiko.SSHException, EOFError, OSError) as e:
                raise Unreachable(f"{self.where}: connection lost during authentication as {user}: {e}")
            if t.is_authenticated():
                return
        raise Unreachable(f"{self.where}: authentication failed for user {user} (publickey; tried "
                          f"{', '.join(tried) if tried else 'no keys: no key file, agent or ~/.ssh key'})")

    # ---- commands ----------------------------------------------------------
    def _lost(self, e: BaseException | str) -> Unreachable:
        return Unreachable(f"{self.where}: connection lost: {e or type(e).__name__}")

    def _active(self) -> paramiko.Transport:
        if self._t is None:
            self.connect()
        if self._t is None or not self._t.is_active():
            raise self._lost("not connected")
        return self._t

    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None,
            max_output: int | None = None) -> CommandResult:
        with self._lock:
            t = self._active()
            if timeout is None:
                timeout = self.params.command_timeout
            try:
                chan = t.open_session(timeout=float(self.params.connect_timeout))
                chan.exec_command(command)
            except (paramiko.SSHException, EOFError, OSError) as e:
                raise self._lost(e)
            try:
                return self._collect(t, chan, stdin, timeout, max_output or MAX_STREAM)
            finally:
                chan.close()

    def start(self, command: str):
        """Start a long-lived command on its own channel and return the paramiko Channel.

        The caller reads it and closes it (engine/connection/runlock.py holds the host's run lock this
        way); the command's stdin stays open until then, or until the connection goes.
        """
        with self._lock:
            t = self._active()
            try:
                chan = t.open_session(timeout=float(self.params.connect_timeout))
                chan.exec_command(command)
            except (paramiko.SSHException, EOFError, OSError) as e:
                raise self._lost(e)
            return chan

    def _collect(self, t, chan, stdin, timeout, limit: int = MAX_STREAM) -> CommandResult:
        deadline = time.monotonic() + timeout if timeout else None
        out, err = Capped(limit), Capped(limit)
        feeder = None
        if stdin and len(stdin) > (1 << 20):
            # a big stdin is fed from a thread so a chatty command cannot deadlock us
            feeder = threading.Thread(target=self._feed, args=(chan, stdin), daemon=True)
            feeder.start()
        else:
            self._feed(chan, stdin)
        # poll, not select: with a connection per host, descriptors pass FD_SETSIZE (1024) at scale
        ready = select.poll()
        ready.register(chan, select.POLLIN)
        while True:
            while chan.recv_ready():
                out.add(chan.recv(READ_CHUNK))
            while chan.recv_stderr_ready():
                err.add(chan.recv_stderr(READ_CHUNK))
            if chan.eof_received or chan.closed:
                if not chan.recv_ready() and not chan.recv_stderr_ready():
                    break
                continue
            if not t.is_active():
                raise self._lost("transport closed")
            wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if wait <= 0:
                return self._timed_out(chan, out, err, timeout)
            ready.poll(wait * 1000)
        while not chan.status_event.is_set():
            wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if wait <= 0:
                return self._timed_out(chan, out, err, timeout)
            chan.status_event.wait(wait)
        if chan.exit_status == -1 and not t.is_active():
            raise self._lost("the connection dropped while the command ran")
        stderr = err.value() + truncation_note("stdout", out) + truncation_note("stderr", err)
        return CommandResult(rc=chan.exit_status, stdout=out.value(), stderr=stderr,
                             stdout_dropped=out.dropped, stderr_dropped=err.dropped)

    @staticmethod
    def _feed(chan, data: bytes | None) -> None:
        try:
            if data:
                chan.sendall(data)
            chan.shutdown_write()
        except (paramiko.SSHException, EOFError, OSError):
            pass      # the command closed its stdin or the channel died; the reader reports it

    def _timed_out(self, chan, out, err, timeout) -> CommandResult:
        self._signal(chan, "TERM")
        chan.close()
        note = f"\n[fleetops: command timed out after {timeout:g}s]\n".encode()
        return CommandResult(rc=-1, stdout=out.value(), stderr=err.value() + note, timed_out=True,
                             stdout_dropped=out.dropped, stderr_dropped=err.dropped)

    @staticmethod
    def _signal(chan, name: str) -> None:
        """RFC 4254 `signal` request (OpenSSH >= 7.9), so a timed-out command does not linger."""
        try:
            m = Message()
            m.add_byte(cMSG_CHANNEL_REQUEST)
            m.add_int(chan.remote_chanid)
            m.add_string("signal")
            m.add_boolean(False)
            m.add_string(name)
            chan.transport._send_user_message(m)
        except Exception:
            pass

    def get_file(self, remote_path: str, local_path: str) -> None:
        with self._lock:
            t = self._active()
            tmp = f"{local_path}.part"
            try:
                sftp = paramiko.SFTPClient.from_transport(t)
            except (paramiko.SSHException, EOFError, OSError) as e:
                raise self._lost(e)
            try:
                sftp.get(remote_path, tmp)
                os.replace(tmp, local_path)
            except (paramiko.SSHException, EOFError) as e:
                raise self._lost(e)
            finally:
                sftp.close()
                if os.path.exists(tmp):
                    os.unlink(tmp)

    def close(self) -> None:
        with self._lock:
            t, self._t = self._t, None
            if t is not None:
                try:
                    t.close()
                except Exception:
                    pass
            j, self._jump = self._jump, None
            if j is not None:
                j.close()
            a, self._agent = self._agent, None
            if a is not None:
                a.close()

    def __repr__(self) -> str:
        return f"<SSHTransport {self.params.user or ''}@{self.where}>"
