"""Local transport: the same contract as SSH, run on the controller with /bin/sh.

Used for `delegate_to: localhost` and in tests, so a module never needs to
know where its command runs.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading

from fleetops.engine.connection.output import MAX_STREAM, READ_CHUNK, Capped, truncation_note
from fleetops.engine.connection.transport import CommandResult, ConnParams, Transport


class LocalTransport(Transport):
    """Runs each command in its own process group so a timeout can kill all of it."""

    def __init__(self, params: ConnParams | None = None):
        self.params = params or ConnParams(name="localhost", address="localhost")
        self._lock = threading.RLock()

    def connect(self) -> None:
        pass

    def run(self, command: str, stdin: bytes | None = None, timeout: float | None = None,
            max_output: int | None = None) -> CommandResult:
        if timeout is None:
            timeout = self.params.command_timeout
        with self._lock:
            proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, close_fds=True)
            limit = max_output or MAX_STREAM
            out, err = Capped(limit), Capped(limit)
            threads = [threading.Thread(target=self._drain, args=(proc.stdout, out), daemon=True),
                       threading.Thread(target=self._drain, args=(proc.stderr, err), daemon=True),
                       threading.Thread(target=self._feed, args=(proc.stdin, stdin), daemon=True)]
            for th in threads:
                th.start()
            timed_out = False
            try:
                proc.wait(timeout=timeout or None)
            except subprocess.TimeoutExpired:
                timed_out = True
                self._kill_group(proc)
                proc.wait()
            except BaseException:
                self._kill_group(proc)
                proc.wait()
                raise
            for th in threads:
                # after a timeout a grandchild that escaped the group may hold the pipes open
                th.join(5 if timed_out else None)
            if timed_out:
                note = f"\n[fleetops: command timed out after {timeout:g}s]\n".encode()
                return CommandResult(rc=-1, stdout=out.value(), stderr=err.value() + note, timed_out=True,
                                     stdout_dropped=out.dropped, stderr_dropped=err.dropped)
            stderr = err.value() + truncation_note("stdout", out) + truncation_note("stderr", err)
            return CommandResult(rc=proc.returncode, stdout=out.value(), stderr=stderr,
                                 stdout_dropped=out.dropped, stderr_dropped=err.dropped)

    @staticmethod
    def _kill_group(proc) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    @staticmethod
    def _drain(stream, sink: Capped) -> None:
        try:
            while True:
                data = stream.read1(READ_CHUNK) if hasattr(stream, "read1") else stream.read(READ_CHUNK)
                if not data:
                    break
                sink.add(data)
        except (OSError, ValueError):
            pass
        finally:
            stream.close()

    @staticmethod
    def _feed(stream, data: bytes | None) -> None:
        try:
            if data:
                stream.write(data)
        except (BrokenPipeError, OSError, ValueError):
            pass      # the command did not read all of its stdin
        finally:
            try:
                stream.close()
            except (BrokenPipeError, OSError):
                pass

    def get_file(self, remote_path: str, local_path: str) -> None:
        tmp = f"{local_path}.part"
        try:
            shutil.copyfile(remote_path, tmp)
            os.replace(tmp, local_path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "<LocalTransport>"
