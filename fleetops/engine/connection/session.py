"""One host's connection for one run: its parameters, its transport and its run lock.

A HostSession is the Transport every task on the host uses. It takes the host's run lock
(engine/connection/runlock.py) with its first command itself: a payload's command rides on the
lock's own channel, any other command waits for the lock first. When the lock cannot be had
the host is refused for the rest of the run (`busy`) and its connection closed.
"""
from __future__ import annotations

from fleetops.engine.connection import runlock
from fleetops.engine.connection.runlock import HostBusy, RunLock
from fleetops.engine.connection.transport import Channel, CommandResult, ConnParams, Transport


class HostSession(Transport):
    """`transport` (not connected yet) for run `run_id`, with the host's run lock taken on first use."""

    def __init__(self, transport: Transport, run_id: str, busy: str | None = None):
        self.transport = transport
        self.run_id = run_id
        self.lock: RunLock | None = None
        self.busy = busy                    # why the host is refused for the run: the lock is another's
        self.connected = False
        self._lock_due = True               # the next command takes the lock first

    @property
    def params(self) -> ConnParams:         # type: ignore[override]
        return self.transport.params

    def connect(self) -> None:
        if self.busy:
            raise HostBusy(self.busy)
        if not self.connected:
            self.transport.connect()
            self.connected = True

    def _take_lock(self, command: str | None = None, line: bytes | None = None, timeout: float | None = None,
                   max_output: int | None = None) -> CommandResult | None:
        """Take the lock if it is due; given a payload's command, on the lock's channel, returning
        its result (None: the caller runs it). A timed-out payload loses the lock with its channel:
        the next command takes it again."""
        if self.busy:
            raise HostBusy(self.busy)
        if not self._lock_due:
            return None
        self._lock_due = False
        try:
            if command is None:
                self.lock = runlock.acquire(self.transport, self.run_id)
                return None
            self.lock, res = runlock.acquire_running(self.transport, self.run_id, command, line or b"",
                                                     timeout, max_output)
        except HostBusy as e:
            self.busy = str(e)
            self._close_transport()
            raise
        self._lock_due = res is not None and self.lock is None
        return res

    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None,
            max_output: int | None = None) -> CommandResult:
        self._take_lock()
        return self.transport.run(command, stdin=stdin, timeout=timeout, max_output=max_output)

    def run_payload(self, command: str, line: bytes, timeout: float | None = None,
                    max_output: int | None = None) -> CommandResult:
        if timeout is None:
            timeout = self.params.command_timeout
        res = self._take_lock(command, line, timeout, max_output)
        if res is not None:
            return res
        return self.transport.run_payload(command, line, timeout=timeout, max_output=max_output)

    def start(self, command: str) -> Channel | None:
        return self.transport.start(command)

    def collect_held(self, chan: Channel, line: bytes, timeout: float | None,
                     max_output: int | None = None) -> CommandResult:
        return self.transport.collect_held(chan, line, timeout, max_output)

    def get_file(self, remote_path: str, local_path: str) -> None:
        self._take_lock()
        self.transport.get_file(remote_path, local_path)

    def _close_transport(self) -> None:
        try:
            self.transport.close()
        except Exception:  # noqa: BLE001 - closing must not hide the run's result
            pass
        self.connected = False

    def close(self) -> None:
        """Release the run lock and close the connection; idempotent."""
        lock, self.lock = self.lock, None
        if lock is not None:
            lock.close()
        self._close_transport()

    def __repr__(self) -> str:
        return f"<HostSession {self.transport!r}>"
