"""SSH transport on paramiko: one connection per host, reused by every task of a run; each
command gets its own exec channel.

Hosts are 30-150 ms away, so round trips decide: after the version and key exchange (2), the
signed public-key request goes at once (1), and each command costs its channel's open and its
exec, whose reply is not waited for (2; 3 with stdin, which waits for the window sshd opens at
exec). tests/lab/engine/connection/test_ssh_round_trips.py counts them.

The host key is checked as OpenSSH's `StrictHostKeyChecking yes` (or `accept-new` with
--accept-new-host-keys) by hostkeys.py, never by paramiko's AutoAddPolicy; keys and the agent
come from keys.py.
"""
from __future__ import annotations

import base64
import getpass
import logging
import os
import re
import select
import socket
import threading
import time
from typing import cast

import paramiko
from paramiko.auth_handler import AuthHandler
from paramiko.common import cMSG_CHANNEL_REQUEST
from paramiko.message import Message

from fleetops.engine.connection.hostkeys import known_hosts_name, read_known_hosts, verify_host_key
from fleetops.engine.connection.keys import DEFAULT_KEYS, load_private_key, open_agent
from fleetops.engine.connection.output import MAX_STREAM, READ_CHUNK, Capped, truncation_note
from fleetops.engine.connection.transport import Channel, CommandResult, ConnParams, Transport
from fleetops.errors import Unreachable

# paramiko logs handshake failures with tracebacks; without a handler Python's
# last-resort handler would print them over the terminal view.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

class _SignedAtOnce(AuthHandler):
    """paramiko's public-key auth, its signed request sent right behind the service request.

    paramiko sends no unsigned query first (OpenSSH's client does, after a `none` request: three
    round trips); its two are the service request, answered by SERVICE_ACCEPT, and then the
    signed request. A server reads its packets in order and accepts or disconnects on the
    service request, so the signed request needs no wait for the accept: one round trip. The
    request is the one paramiko builds and signs on SERVICE_ACCEPT (the same algorithm choice,
    agent keys and certificates alike)."""

    def _request_auth(self):
        super()._request_auth()
        accept = Message()
        accept.add_string("ssh-userauth")
        accept.rewind()
        super()._parse_service_accept(accept)

    def _parse_service_accept(self, m):
        """The signed request went with the service request; nothing is left to send."""


class _FleetTransport(paramiko.Transport):
    """paramiko's Transport, its thread waking once a second instead of ten times when idle, and
    its public-key auth in one round trip where the key allows it (auth_publickey_at_once).

    Each connection's thread polls its socket to check keepalives and whether it was closed;
    a fleet keeps a connection per host open for the whole run, and at a thousand hosts ten
    wake-ups a second each were the controller's largest cost, growing with hosts x run time.
    Data still wakes it at once, a close does not wait for it, and keepalives are 15 s apart."""

    _active_check_timeout = 1.0

    def can_auth_at_once(self, key) -> bool:
        """An RSA key's signature algorithm depends on the server's server-sig-algs (EXT_INFO,
        which follows NEWKEYS): until paramiko has read it, an RSA key takes the usual path."""
        return "rsa" not in key.get_name() or "server-sig-algs" in self.server_extensions

    def auth_publickey_at_once(self, username: str, key) -> list:
        """auth_publickey with the signed request sent without waiting for SERVICE_ACCEPT: the
        same answer (allowed methods on partial success) and the same exceptions."""
        if not self.active or not self.initial_kex_done:
            raise paramiko.SSHException("No existing session")
        event = threading.Event()
        self.auth_handler = _SignedAtOnce(self)
        self.auth_handler.auth_publickey(username, key, event)
        return self.auth_handler.wait_for_response(event)


# known_hosts key type -> host key algorithms that prove possession of that key
_ALGS_FOR_TYPE = {
    "ssh-rsa": ("rsa-sha2-512", "rsa-sha2-256"),
}

_AEAD = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _prefer_aead(t) -> None:
    """AES-GCM first, as OpenSSH's client orders it (after chacha20, which paramiko lacks):
    authenticated in C, where paramiko checks a CTR cipher's HMAC on every packet in a Python
    loop; about a tenth of the controller's CPU per connection. Same set of ciphers offered."""
    opts = t.get_security_options()
    have = tuple(opts.ciphers)
    first = tuple(c for c in _AEAD if c in have)
    opts.ciphers = first + tuple(c for c in have if c not in first)


def _channel_request(chan: paramiko.Channel, kind: str, want_reply: bool, arg: str) -> None:
    """An RFC 4254 channel request with one string argument, sent without waiting for its reply
    (paramiko's own requests wait for theirs)."""
    m = Message()
    m.add_byte(cMSG_CHANNEL_REQUEST)
    m.add_int(chan.remote_chanid)
    m.add_string(kind)
    m.add_boolean(want_reply)
    m.add_string(arg)
    chan.transport._send_user_message(m)


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
                raise Unreachable(f"{self.where}: {type(e).__name__}: {e}") from e

    def _connect(self) -> None:
        p = self.params
        timeout = float(p.connect_timeout)
        sock = self._open_socket(timeout)
        t = _FleetTransport(sock)
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
                                  f"or it is overloaded)") from e
            if known_types and ("host key" in msg.lower() or "incompatible" in msg.lower()):
                raise Unreachable(f"{self.where}: host offers no host key of the type known_hosts has "
                                  f"for {self.host_key_name} ({', '.join(known_types)}); refusing to "
                                  f"connect") from e
            raise Unreachable(f"{self.where}: SSH handshake failed: {msg}") from e
        except (EOFError, OSError) as e:
            raise Unreachable(f"{self.where}: connection closed during SSH handshake "
                              f"({e or type(e).__name__})") from e
        if t.host_key is None:
            raise Unreachable(f"{self.where}: SSH handshake did not complete within {2 * timeout + 5:g}s")
        verify_host_key(t.host_key, self.host_key_name, known, revoked, self.known_hosts_path,
                        self.params.accept_new_host_keys)
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
            raise Unreachable(f"{self.where}: cannot resolve {p.address}: {e.strerror or e}") from e
        except ConnectionRefusedError:
            raise Unreachable(f"{self.where}: connection refused") from None
        except (socket.timeout, TimeoutError):
            raise Unreachable(f"{self.where}: TCP connect timed out after {timeout:g}s") from None
        except OSError as e:
            raise Unreachable(f"{self.where}: {e.strerror or e}") from e
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
            raise Unreachable(f"{self.where}: ProxyCommand {cmd!r} failed to start: {e}") from e
        sock.settimeout(timeout)
        return sock

    def _open_via_jump(self, timeout: float):
        p = self.params
        try:
            juser, jhost, jport = parse_jump(p.proxy_jump or "")
        except ValueError:
            raise Unreachable(f"{self.where}: bad ProxyJump {p.proxy_jump!r} "
                              f"(want [user@]host[:port])") from None
        jp = ConnParams(name=jhost, address=jhost, port=jport, user=juser, key_file=p.key_file,
                        known_hosts=p.known_hosts, accept_new_host_keys=p.accept_new_host_keys,
                        connect_timeout=p.connect_timeout, keepalive=p.keepalive)
        self._jump = SSHTransport(jp)
        try:
            self._jump.connect()
        except Unreachable as e:
            raise Unreachable(f"{self.where}: jump host failed: {e}") from e
        try:
            return cast(paramiko.Transport, self._jump._t).open_channel("direct-tcpip", (p.address, int(p.port)),
                                              ("127.0.0.1", 0), timeout=timeout)
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise Unreachable(f"{self.where}: jump host {jp.address}:{jp.port} could not open a "
                              f"tunnel: {e}") from e

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
                raise Unreachable(f"{self.where}: cannot load private key {path}: {e}") from e
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
            self._agent, keys = open_agent()
            return keys
        return list(self._agent.get_keys())

    def _auth(self, t: _FleetTransport) -> None:
        """Each candidate key in turn, its signed request sent at once (one round trip); once the
        server refuses such a request, that key again and the rest through paramiko's usual path
        (a server that wanted the service accepted first), one more try of sshd's MaxAuthTries."""
        user = self.params.user or getpass.getuser()
        tried = []
        at_once = True
        for label, key in self._candidate_keys():
            tried.append(label)
            try:
                if at_once and t.can_auth_at_once(key):
                    try:
                        t.auth_publickey_at_once(user, key)
                    except paramiko.BadAuthenticationType:
                        raise
                    except paramiko.AuthenticationException:
                        at_once = False
                        t.auth_publickey(user, key)
                else:
                    t.auth_publickey(user, key)
            except paramiko.AuthenticationException:
                continue
            except (paramiko.SSHException, EOFError, OSError) as e:
                raise Unreachable(f"{self.where}: connection lost during authentication as {user}: {e}") from e
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
            chan = self._exec(t, command)
            try:
                return self._collect(t, chan, stdin, timeout, max_output or MAX_STREAM)
            finally:
                chan.close()

    def start(self, command: str) -> Channel:
        """Start a long-lived command on its own channel and return the paramiko Channel.

        The caller reads it and closes it (engine/connection/runlock.py holds the host's run lock this
        way); the command's stdin stays open until then, or until the connection goes.
        """
        with self._lock:
            return self._exec(self._active(), command)

    def _exec(self, t: paramiko.Transport, command: str) -> paramiko.Channel:
        """`command` started on a new session channel, its exec request sent without waiting for
        the reply (the command's stdin and EOF follow in the same flight; a refusal closes the
        channel, which the reader reports). A channel opened ahead, while the command before ran,
        saved the open's round trip but made sshd drop the connection ("ieof packet referred to
        nonexistent channel") on quick command sequences (tests/lab/faults/test_hostile_input.py)."""
        try:
            chan = t.open_session(timeout=float(self.params.connect_timeout))
            _channel_request(chan, "exec", True, command)
        except (paramiko.SSHException, EOFError, OSError) as e:
            raise self._lost(e) from e
        return chan

    def collect_held(self, chan: Channel, line: bytes, timeout: float | None, max_output: int | None = None) -> CommandResult:
        """Feed `line` to a channel from start() without closing its stdin, and collect its output
        until the command closes its stdout and stderr (it may live on, holding stdin); rc is -1,
        the caller reads the status from the output. A timeout signals and closes the channel."""
        with self._lock:
            t = self._active()
            return self._collect(t, chan, line, timeout, max_output or MAX_STREAM, hold=True)

    def _collect(self, t, chan, stdin, timeout, limit: int = MAX_STREAM, hold: bool = False) -> CommandResult:
        deadline = time.monotonic() + timeout if timeout else None
        out, err = Capped(limit), Capped(limit)
        feeder = None
        if stdin and len(stdin) > (1 << 20):
            # a big stdin is fed from a thread so a chatty command cannot deadlock us
            feeder = threading.Thread(target=self._feed, args=(chan, stdin), daemon=True)
            feeder.start()
        else:
            self._feed(chan, stdin, close=not hold)
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
        if hold:
            return CommandResult(rc=-1, stdout=out.value(), stderr=err.value() + truncation_note("stdout", out)
                                 + truncation_note("stderr", err), stdout_dropped=out.dropped, stderr_dropped=err.dropped)
        while not chan.status_event.is_set():
            wait = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if wait <= 0:
                return self._timed_out(chan, out, err, timeout)
            chan.status_event.wait(wait)
        if chan.exit_status == -1 and not t.is_active():
            raise self._lost("the connection dropped while the command ran")
        if chan.exit_status == -1 and not chan.event_ready:
            raise Unreachable(f"{self.where}: the host refused to run the command (its exec request was denied)")
        stderr = err.value() + truncation_note("stdout", out) + truncation_note("stderr", err)
        return CommandResult(rc=chan.exit_status, stdout=out.value(), stderr=stderr,
                             stdout_dropped=out.dropped, stderr_dropped=err.dropped)

    @staticmethod
    def _feed(chan, data: bytes | None, close: bool = True) -> None:
        try:
            if data:
                chan.sendall(data)
            if close:
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
            _channel_request(chan, "signal", False, name)
        except Exception:
            pass

    def get_file(self, remote_path: str, local_path: str) -> None:
        with self._lock:
            t = self._active()
            tmp = f"{local_path}.part"
            try:
                sftp = paramiko.SFTPClient.from_transport(t)
            except (paramiko.SSHException, EOFError, OSError) as e:
                raise self._lost(e) from e
            try:
                sftp.get(remote_path, tmp)
                os.replace(tmp, local_path)
            except (paramiko.SSHException, EOFError) as e:
                raise self._lost(e) from e
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
