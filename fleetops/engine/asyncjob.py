"""A task's `async:` / `poll:` as ansible-core runs them, for a module's one host command line.

The line starts as a background job on the host (the `async_job` payload: detached, killed there
after `async` seconds, its result in ~/.ansible_async/<jid>). With `poll: 0` the task ends at
once with the job's id (AsyncStarted carries that result); with `poll: N` the controller asks the
`async_status` payload every N seconds, at most `async` seconds in all, as ansible-core's task
executor does, and hands the module the finished command's output as if it had run in the
foreground (the result file is then removed). A job still running at the end is failed with
ansible-core's message.
"""
from __future__ import annotations

import base64
import os
import random
import threading
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Callable

from fleetops.engine.connection.transport import CommandResult
from fleetops.engine.module import Result


class AsyncStarted(Exception):
    """poll: 0 - the job runs on; `result` is the task's result (its ansible_job_id, results_file)."""

    def __init__(self, result: dict):
        super().__init__(result.get("ansible_job_id"))
        self.result = result


class AsyncFailed(Exception):
    """The job could not start, or did not finish in time: `result` is the task's failed result."""

    def __init__(self, result: dict):
        super().__init__(result.get("msg"))
        self.result = result


def new_jid() -> str:
    """ansible-core's shape: j<12 random digits>.<controller pid>."""
    return f"j{random.randint(0, 999999999999)}.{os.getpid()}"


def job_output(data: Mapping[str, Any]) -> CommandResult:
    """A finished job's file as the foreground run would have returned it."""
    return CommandResult(rc=int(data.get("rc", -1)), stdout=str(data.get("stdout", "")).encode(),
                         stderr=str(data.get("stderr", "")).encode())


@dataclass
class AsyncJob:
    """One task's async settings on one host; `call(name, args)` runs a payload as the login user."""

    seconds: float
    poll: float
    call: Callable[[str, dict], Result]
    stop: threading.Event
    info: dict = field(default_factory=dict)     # ansible_job_id, started, finished, results_file

    def run(self, line: str, stdin: bytes | None = None, shown: str = "") -> CommandResult:
        jid = new_jid()
        args: dict[str, Any] = {"jid": jid, "cmd": line, "shown": shown, "time_limit": self.seconds}
        if stdin:
            args["stdin"] = base64.b64encode(stdin).decode()
        started = self.call("async_job", args)
        if started.get("failed") or not started.get("ansible_job_id"):
            raise AsyncFailed({"failed": True, "changed": False,
                               "msg": started.get("msg") or "No job id was returned by the async task"})
        info = {"ansible_job_id": jid, "started": True, "finished": False,
                "results_file": started.get("results_file")}
        if self.poll <= 0:
            raise AsyncStarted({**info, "changed": True, "failed": False})
        status: Result = {}
        time_left = self.seconds
        while time_left > 0:
            if self.stop.wait(self.poll):
                break
            status = self.call("async_status", {"jid": jid})
            time_left -= self.poll
            if status.get("finished") or status.get("failed"):
                break
        if not status.get("finished"):
            raise AsyncFailed({"failed": True, "changed": False, "async_result": status,
                               "msg": f"async task did not complete within the requested time - {self.seconds:g}s"})
        self.call("async_status", {"jid": jid, "mode": "cleanup"})
        self.info = {**info, "finished": True}
        if "rc" not in status:                  # killed at the limit on the host, or the job broke
            raise AsyncFailed({**status, **self.info, "failed": True, "changed": False})
        return job_output(status)
