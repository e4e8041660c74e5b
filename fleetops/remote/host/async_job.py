"""Payload: start one shell command line as a background job (a task's `async:`), as ansible-core's
async_wrapper does: the job runs detached from the connection, is killed after `time_limit`
seconds, and leaves its result in ~/.ansible_async/<jid> (directory 0700, file 0600, written
whole by rename), which the `async_status` payload reads. Returns at once with the job's id.
"""
from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import time

from fleetops.remote.host.daemon import detach

_JID = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,80}\Z")
ASYNC_DIR = "~/.ansible_async"


def job_path(jid: object) -> str:
    """The job's result file; a jid that could leave the directory is refused."""
    if not isinstance(jid, str) or not _JID.match(jid):
        raise ValueError(f"not a job id: {jid!r}")
    return os.path.join(os.path.expanduser(ASYNC_DIR), jid)


def write_job(path: str, data: dict) -> None:
    """The whole result or nothing: a reader never sees half a file."""
    tmp = f"{path}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(json.dumps(data))
    os.replace(tmp, path)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _run_job(path: str, jid: object, line: str, stdin: bytes | None, time_limit: float, shown: str) -> None:
    """In the detached process: run the line, kill its group at the limit, write the result."""
    started = time.time()
    proc = subprocess.Popen(["/bin/sh", "-c", line], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
    try:
        out, err = proc.communicate(stdin or b"", timeout=time_limit)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.communicate()
        write_job(path, {"msg": "Timeout exceeded", "failed": True, "child_pid": proc.pid})
        return
    write_job(path, {"rc": proc.returncode, "stdout": _text(out), "stderr": _text(err), "cmd": shown,
                     "start": started, "end": time.time(), "ansible_job_id": jid})


def main(args: dict) -> dict:
    jid, line = args.get("jid"), args.get("cmd")
    try:
        path = job_path(jid)
        time_limit = float(args.get("time_limit"))  # type: ignore[arg-type]  # None: the TypeError below
    except (TypeError, ValueError) as e:
        return {"failed": True, "changed": False, "msg": str(e)}
    if not isinstance(line, str) or not line:
        return {"failed": True, "changed": False, "msg": "no command line to run"}
    stdin = base64.b64decode(args["stdin"]) if args.get("stdin") else None
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    write_job(path, {"started": True, "finished": False, "ansible_job_id": jid})
    if detach():      # the runner's own copy of the result channel closed too: it must end
        try:
            _run_job(path, jid, line, stdin, time_limit, str(args.get("shown") or ""))
        except BaseException as e:  # noqa: BLE001 - the job's reader must learn why, whatever it was
            try:
                write_job(path, {"failed": True, "msg": f"{type(e).__name__}: {e}", "ansible_job_id": jid})
            finally:
                os._exit(1)
        os._exit(0)
    return {"changed": False, "failed": False, "started": True, "finished": False, "ansible_job_id": jid,
            "results_file": path}
