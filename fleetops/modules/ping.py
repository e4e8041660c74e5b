"""`ping`: prove fleetops can log in and run the host's Python (as ansible.builtin.ping)."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext


class Ping(Module):
    name = "ping"
    args = {"data": Arg(str, default="pong")}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        return ctx.payload("ping", {"data": "pong" if args.get("data") is None else str(args["data"])})
