"""`wait_for`: block until a port on the host opens/closes or a path appears/disappears.

The polling runs on the host (payload `wait_for`), in one round trip.
"""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result


class WaitFor(Module):
    name = "wait_for"
    args = {
        "host": Arg(str, default="127.0.0.1"),
        "port": Arg(int),
        "path": Arg(str),
        "state": Arg(str, default="started", choices=("started", "stopped", "present", "absent")),
        "timeout": Arg((int, float), default=300),
        "delay": Arg((int, float), default=0),
        "sleep": Arg((int, float), default=1),
        "connect_timeout": Arg((int, float), default=5),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        if args.get("port") is not None and args.get("path"):
            return result(failed=True, msg="give port or path, not both")
        pargs = {k: args.get(k) for k in self.args}
        budget = float(args.get("timeout") or 0) + float(args.get("delay") or 0) + 30
        return ctx.payload("wait_for", pargs, timeout=budget)
