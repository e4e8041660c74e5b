"""The host-side run lock: two fleetops runs never interleave on one host account.

Before the run's first command on a host, a tiny holder takes the lock: the shell opens the
login user's home directory, `flock -n` locks it (flock(2) on the directory, so no file is
created and check mode leaves the host untouched), and the shell becomes `cat`, which keeps the
locked descriptor and waits for its stdin to close. The lock therefore lives exactly as long as
the run's SSH connection: the executor closing it, the controller dying (even SIGKILL) or the
connection dropping all close that stdin, and the kernel drops the lock with the process.
Nothing stale is ever left to clean up by hand. The holder's argv carries its record (run id,
controller, pid, since), which a refused run reads with ps(1).

When that first command is a payload it rides on the holder's channel (lock_and_run_command):
once the lock is held the shell runs it in a subshell without the lock's descriptor (so nothing
the payload leaves running keeps the lock), prints its exit status on a line of its own, then
becomes `cat`; the lock costs no command of its own. Any other first command takes the lock on
a channel of its own first (lock_command), one round trip with only sh, flock(1) and cat.

A second run finds the lock busy and refuses that host ("host busy", a failed host, nothing run
there) naming the holder: run id, controller, pid, since when. Two inventory names for the same
account in one run share the lock (same run id). On a host without flock(1) the host's python3
takes the same flock(2) lock and holds it the same way (the two interlock). A host where neither
can lock the home directory (no flock(1) and no python3, or a home that cannot be flock'ed, as
on some NFS mounts) is refused with that reason: nothing is run there rather than run
unserialised.

This lock is per run and per account; a flow that needs a lease across its steps takes its
own (the `hostlock` payload).
"""
from __future__ import annotations

import getpass
import json
import os
import shlex
import socket
import time

from fleetops.engine.connection.transport import CommandResult, Transport
from fleetops.engine.payload import DEFAULT_PYTHONS
from fleetops.errors import EXIT_HOST_FAILED, FleetopsError, Unreachable

TAG = "fleetops-run-lock"
HELD = "FLEETOPS_RUN_LOCK_HELD"
BUSY = "FLEETOPS_RUN_LOCK_BUSY"
UNAVAILABLE = "FLEETOPS_RUN_LOCK_UNAVAILABLE"
NO_FLOCK = "FLEETOPS_RUN_LOCK_NO_FLOCK"
FIRST_EXIT = "FLEETOPS_FIRST_EXIT"


class HostBusy(FleetopsError):
    """Another fleetops run holds the host's run lock, or it cannot be taken there: nothing is
    run on that host."""

    exit_code = EXIT_HOST_FAILED


# The same lock without flock(1): flock(2) on the home directory from the host's python, which
# then holds it until its stdin closes. Exit 1 when busy (as flock -n), so the shell names the holder.
PY_LOCK = (
    "import sys,os,errno,fcntl\n"
    "try:\n fd=os.open(os.path.expanduser('~'),os.O_RDONLY)\n"
    "except OSError as e:\n print('@U cannot open the home directory: %s'%e.strerror);sys.exit(0)\n"
    "try:\n fcntl.flock(fd,fcntl.LOCK_EX|fcntl.LOCK_NB)\n"
    "except OSError as e:\n"
    " if e.errno in(errno.EWOULDBLOCK,errno.EAGAIN,errno.EACCES):sys.exit(1)\n"
    " print('@U cannot lock the home directory: %s'%e.strerror);sys.exit(0)\n"
    "print('@H');sys.stdout.flush()\n"
    "while sys.stdin.buffer.read(65536):pass\n"
)


# the login account's processes, each whole argv (-ww: never cut to a terminal's width)
PS_HOLDERS = 'ps -ww -u "$(id -u)" -o args= 2>/dev/null'


def holder_in_args(line: str) -> dict:
    """The holder's record in one `ps -o args=` line (its argv: `... fleetops-run-lock {json}`);
    {} when the line is not a holder's or its record does not read."""
    at = line.find(TAG + " {")
    if at < 0:
        return {}
    try:
        record = json.loads(line[at + len(TAG) + 1:].strip())
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def holder_record(run_id: str) -> dict:
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry: the uid says enough
        user = str(os.getuid())
    return {"run_id": run_id, "controller": f"{user}@{socket.gethostname()}", "pid": os.getpid(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _lock_script(record: dict, held: str, without_flock: str) -> str:
    """The lock's POSIX sh line: `held` runs once flock(1) holds the lock, before the shell
    becomes the holder; `without_flock` is what a host without flock(1) does instead (it may set
    rc to 1, busy). A busy lock is reported with its holder."""
    rec = shlex.quote(json.dumps(record, separators=(",", ":")))
    # The holder's own argv carries its record, so a refused run can name it without any file
    # (its ps line is read back by holder_in_args).
    find_holder = f"{PS_HOLDERS} | grep -F '{TAG} {{' | grep -v grep | head -n 1"
    # The shell opens the home directory on fd 9 and flock(1) locks that open file (then exits);
    # the shell becomes `cat`, which inherits fd 9 and so the lock, and reads stdin until the
    # connection's channel closes. One short-lived child instead of three: this runs once per
    # host per run. cat reads `-` (stdin) first; the two words after it only label the process
    # for ps (by then the channel is gone and cat's complaints go to /dev/null). PATH is widened
    # for flock and cat only: fo_path keeps the login shell's own.
    return ('fo_path="$PATH"; PATH="$PATH:/usr/bin:/bin"; '
            'if command -v flock >/dev/null 2>&1; then '
            'exec 9<"$HOME" || { echo "' + UNAVAILABLE + ' cannot open the home directory"; exit 0; }; '
            'flock -n 9; rc=$?; '
            f'if [ "$rc" = 0 ]; then echo {HELD}; {held}exec cat - {TAG} {rec} >/dev/null 2>&1; fi; '
            f'if [ "$rc" != 1 ]; then echo "{UNAVAILABLE} flock(1) cannot lock the home directory (rc $rc)"; exit 0; fi; '
            f'else {without_flock} fi; '
            f'if [ "$rc" = 1 ]; then printf "%s " {BUSY}; {find_holder}; echo; fi; '
            'exit "$rc"')


def lock_command(record: dict) -> str:
    """POSIX sh line: hold the lock until stdin closes, or report it busy (with its holder).
    Without flock(1), python holds the lock as a child of the shell (its argv labelled the same
    way), so the shell is still there to name a holder when it exits 1 (busy)."""
    rec = shlex.quote(json.dumps(record, separators=(",", ":")))
    py = shlex.quote(PY_LOCK.replace("@U", UNAVAILABLE).replace("@H", HELD))
    pythons = " ".join(shlex.quote(p) for p in DEFAULT_PYTHONS)
    return _lock_script(record, "", (
        f'rc=127; for p in {pythons}; do if command -v "$p" >/dev/null 2>&1; then '
        f'"$p" -I -S -c {py} {TAG} {rec} 2>/dev/null; rc=$?; break; fi; done; '
        f'if [ "$rc" = 127 ]; then echo "{UNAVAILABLE} neither flock(1) nor python3 on the host"; exit 0; fi; '
        f'if [ "$rc" = 0 ]; then exit 0; fi; '
        f'if [ "$rc" != 1 ]; then echo "{UNAVAILABLE} python3 on the host could not take the lock (rc $rc)"; '
        'exit 0; fi;'))


def lock_and_run_command(record: dict, first: str) -> str:
    """POSIX sh line: lock_command's lock, then `first` (a payload's command line; its stdin is
    the channel's, of which it reads one line) in a subshell with the login shell's own PATH and
    without fd 9, its exit status on a line of its own, then hold the lock until stdin closes.
    Without flock(1) it only says so: the caller then takes the lock through lock_command's
    python path and runs `first` on its own."""
    return _lock_script(record, f'( PATH="$fo_path"; exec 9<&-; {first} ); printf "\\n%s %s\\n" {FIRST_EXIT} "$?"; ',
                        f'echo {NO_FLOCK}; exit 0;')


def _read_marker(chan, timeout: float) -> tuple[str | None, str]:
    """(marker, rest of its line) from the first line that starts with one of ours; login-shell
    chatter before it is skipped. (None, why) on EOF or timeout."""
    deadline = time.monotonic() + timeout
    buf = b""
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            text = line.decode("utf-8", "replace").strip()
            for marker in (HELD, BUSY, UNAVAILABLE):
                if text.startswith(marker):
                    return marker, text[len(marker):].strip()
        left = deadline - time.monotonic()
        if left <= 0:
            return None, f"no answer within {timeout:g}s"
        chan.settimeout(min(left, 1.0))
        try:
            data = chan.recv(4096)
        except socket.timeout:
            continue
        except (OSError, EOFError) as e:
            return None, f"channel error: {e}"
        if not data:
            if buf:
                buf += b"\n"
                continue
            return None, "the lock command ended without an answer"
        buf += data


class RunLock:
    """A held lock: close() releases it (closing the channel closes the holder's stdin)."""

    def __init__(self, chan):
        self.chan = chan

    def close(self) -> None:
        chan, self.chan = self.chan, None
        if chan is None:
            return
        try:
            chan.shutdown_write()
        except Exception:  # noqa: BLE001
            pass
        try:
            chan.close()
        except Exception:  # noqa: BLE001
            pass


def describe(record: dict) -> str:
    parts = [f"run {record.get('run_id', '?')}"]
    if record.get("controller"):
        parts.append(f"{record['controller']}" + (f" pid {record['pid']}" if record.get("pid") else ""))
    if record.get("since"):
        parts.append(f"since {record['since']}")
    return ", ".join(parts)


def acquire(transport: Transport, run_id: str, timeout: float | None = None) -> RunLock | None:
    """Take the host's run lock through `transport`; RunLock, or None when there is none to take
    (a transport without long-lived channels, no flock on the host, same run). Raises HostBusy."""
    params = transport.params
    if timeout is None:
        timeout = float(params.command_timeout or 60)
    chan = transport.start(lock_command(holder_record(run_id)))
    if chan is None:
        return None                       # the controller itself (local): nothing to serialise
    marker, rest = _read_marker(chan, timeout)
    if marker == HELD:
        return RunLock(chan)
    try:
        chan.close()
    except Exception:  # noqa: BLE001
        pass
    name = params.name or "host"
    if marker == BUSY:
        record = holder_in_args(rest)
        if record.get("run_id") == run_id:
            return None                   # another inventory name for the same account, this run
        who = f" ({describe(record)})" if record else ""
        raise HostBusy(f"host busy: another fleetops run holds its run lock{who}; nothing was run on {name}")
    raise HostBusy(f"cannot take the run lock on {name}: {rest or 'no answer from the lock command'}; "
                   "nothing was run there (a second run could interleave with this one)")


def _marker_line(stdout: bytes) -> tuple[str | None, str, int]:
    """(marker, rest of its line, offset just past the line) of the first line that starts with
    one of ours; login-shell chatter before it is skipped."""
    at = 0
    while at < len(stdout):
        end = stdout.find(b"\n", at)
        end = len(stdout) if end < 0 else end
        text = stdout[at:end].decode("utf-8", "replace").strip()
        for marker in (HELD, BUSY, UNAVAILABLE, NO_FLOCK):
            if text.startswith(marker):
                return marker, text[len(marker):].strip(), end + 1
        at = end + 1
    return None, "", len(stdout)


def acquire_running(transport: Transport, run_id: str, command: str, line: bytes, timeout: float | None,
                    max_output: int | None = None) -> tuple[RunLock | None, CommandResult | None]:
    """Take the host's run lock and run the payload `command` (stdin: `line`) on the lock's
    channel: (the held lock, the payload's result). (None, None): no lock to hold here (another
    inventory name of this run holds it, or the host has no flock(1): then it was taken as
    acquire() takes it), the caller runs the payload. (None, result): the payload timed out or
    its channel dropped, so the lock went with it; the caller takes it again before the next
    command. Raises HostBusy as acquire() does."""
    chan = transport.start(lock_and_run_command(holder_record(run_id), command))
    if chan is None:
        return None, None                 # the controller itself (local): nothing to serialise
    res = transport.collect_held(chan, line, timeout, max_output)
    marker, rest, after = _marker_line(res.stdout)
    name = transport.params.name or "host"
    if marker == HELD:
        body = res.stdout[after:]
        cut = body.rfind(("\n" + FIRST_EXIT + " ").encode())     # the shell put a newline before it
        if cut >= 0 and not res.timed_out:
            word = body[cut + len(FIRST_EXIT) + 2:].split(b"\n", 1)[0].strip()
            rc = int(word) if word.isdigit() else -1
            return RunLock(chan), CommandResult(rc=rc, stdout=body[:cut], stderr=res.stderr,
                                                stdout_dropped=res.stdout_dropped, stderr_dropped=res.stderr_dropped)
        try:
            chan.close()
        except Exception:  # noqa: BLE001
            pass
        if res.timed_out:
            return None, CommandResult(rc=-1, stdout=body, stderr=res.stderr, timed_out=True)
        raise Unreachable(f"{name}: connection lost: the run lock's channel ended while its first payload ran")
    try:
        chan.close()
    except Exception:  # noqa: BLE001
        pass
    if marker == NO_FLOCK:
        return acquire(transport, run_id), None
    if marker == BUSY:
        record = holder_in_args(rest)
        if record.get("run_id") == run_id:
            return None, None             # another inventory name for the same account, this run
        who = f" ({describe(record)})" if record else ""
        raise HostBusy(f"host busy: another fleetops run holds its run lock{who}; nothing was run on {name}")
    why = rest or (f"no answer within {timeout or 0:g}s" if res.timed_out else "the lock command ended without an answer")
    raise HostBusy(f"cannot take the run lock on {name}: {why}; "
                   "nothing was run there (a second run could interleave with this one)")
