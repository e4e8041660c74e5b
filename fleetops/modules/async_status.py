"""`async_status`: the state of a job a task started with `async:` (ansible.builtin.async_status).

`status` (default) reads the job's result file on the host; a finished command or shell job
comes back as that module's own result (rc, stdout, stderr, changed, failed) with
`ansible_job_id`, `started`, `finished`, `results_file`, as in ansible-core. `cleanup` removes
the file. Jobs live in the login user's ~/.ansible_async, so the payload runs without become.
"""
from __future__ import annotations

from fleetops.engine.asyncjob import job_output
from fleetops.engine.module import Arg, Module, TaskContext
from fleetops.modules.command import program_result


class AsyncStatus(Module):
    name = "async_status"
    args = {"jid": Arg(str, required=True), "mode": Arg(str, default="status", choices=("status", "cleanup"))}
    uses_become = False

    def run(self, ctx: TaskContext, args: dict) -> dict:
        mode = args.get("mode") or "status"
        res = dict(ctx.payload("async_status", {"jid": str(args["jid"]), "mode": mode}))
        if mode == "cleanup" or not res.get("finished") or "rc" not in res:
            res.setdefault("changed", False)
            return res
        keys = {k: res[k] for k in ("ansible_job_id", "results_file") if k in res}
        return {**program_result(None, str(res.get("cmd") or ""), job_output(res)), **keys,
                "started": True, "finished": True}
