"""The connection contract every transport (SSH, local) fulfils.

The executor and the modules only ever see this interface, so a task runs the
same way over SSH to a host and on the controller (`delegate_to: localhost`).
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Protocol


class Channel(Protocol):
    """A command's channel as start() returns it (a paramiko Channel): read, written, closed."""

    def recv(self, n: int) -> bytes: ...
    def settimeout(self, timeout: float | None) -> None: ...
    def shutdown_write(self) -> None: ...
    def close(self) -> None: ...


@dataclass
class CommandResult:
    rc: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    stdout_dropped: int = 0      # bytes beyond the output cap, not kept
    stderr_dropped: int = 0


# connection plugins fleetops has, by the names ansible-core gives them -> fleetops' transport
CONNECTIONS = {"local": "local", "ssh": "ssh", "smart": "ssh", "paramiko": "ssh", "paramiko_ssh": "ssh"}


def connection_name(value) -> str | None:
    """`local`/`ssh` for a connection plugin name fleetops has (also `ansible.builtin.`); else None."""
    if not isinstance(value, str):
        return None
    name = value.strip()
    for prefix in ("ansible.builtin.", "ansible.legacy."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return CONNECTIONS.get(name)


@dataclass
class ConnParams:
    """Everything needed to reach one host, resolved from inventory vars and ~/.ssh/config."""

    name: str                    # inventory hostname
    address: str                 # ansible_host / HostName, else name
    port: int = 22
    user: str | None = None      # None: the controller's user
    key_file: str | None = None
    python: str | None = None    # ansible_python_interpreter; None: discover
    become_user: str | None = None
    become: bool = False         # ansible_become: every task on this host runs through sudo
    proxy_jump: str | None = None
    known_hosts: str | None = None  # fleetops_known_hosts var / --known-hosts; None: ~/.ssh/known_hosts
    accept_new_host_keys: bool = False
    connection: str = "ssh"      # ansible_connection: "local" runs on the controller
    connect_timeout: float = 10.0
    command_timeout: float = 600.0
    keepalive: int = 15
    extra: dict = field(default_factory=dict)   # proxy_command, identities_only (sshargs.py)


@dataclass
class ConnDefaults:
    """ansible.cfg's connection settings, below every host variable."""

    remote_user: str | None = None
    timeout: float | None = None
    private_key_file: str | None = None
    ssh_args: list = field(default_factory=list)   # [(text, where)]: [ssh_connection] ssh_args first


class Transport(abc.ABC):
    """One open connection to one host, reused by every task of a run.

    Implementations must be safe to call from one worker thread at a time
    (the executor never runs two tasks on one host at once).
    """

    params: ConnParams

    @abc.abstractmethod
    def connect(self) -> None:
        """Open the connection. Raises fleetops.errors.Unreachable with a one-line reason."""

    @abc.abstractmethod
    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None,
            max_output: int | None = None) -> CommandResult:
        """Run a shell command line (already quoted by the caller) and collect its output.

        A dropped connection raises Unreachable; a timeout returns timed_out=True, rc=-1.
        Each stream keeps its first `max_output` bytes (default output.MAX_STREAM, sized for
        payload results); the rest is read and counted in std*_dropped, never held.
        """

    def run_payload(self, command: str, line: bytes, timeout: float | None = None,
                    max_output: int | None = None) -> CommandResult:
        """Run a payload's command line whose whole stdin is `line`, one line it reads first. A
        transport may carry it on a channel it opens anyway (SSH: the run lock's)."""
        return self.run(command, stdin=line, timeout=timeout, max_output=max_output)

    def start(self, command: str) -> Channel | None:
        """Start a long-lived command on a channel of its own and return it, its stdin left open
        until the caller closes it (the host's run lock, engine/connection/runlock.py); None: this
        transport has no such channels (the controller itself), so there is no lock to hold."""
        return None

    def collect_held(self, chan: Channel, line: bytes, timeout: float | None,
                     max_output: int | None = None) -> CommandResult:
        """Feed `line` to a channel from start() without closing its stdin; collect its output
        until the command closes stdout and stderr (rc -1: the caller reads the status from it)."""
        raise NotImplementedError(f"{type(self).__name__} starts no channels")

    @abc.abstractmethod
    def get_file(self, remote_path: str, local_path: str) -> None:
        """Copy a host file to the controller (used by the `fetch` module)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close; idempotent."""
