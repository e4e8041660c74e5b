"""`meta`: control the play itself (flush_handlers, end_play, end_host, end_batch, noop).

The module only names the action; the executor carries it out for every host the task
was not skipped on (its `when` true), as ansible-core's linear strategy does.
"""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result

ACTIONS = ("flush_handlers", "end_play", "end_host", "end_batch", "noop")


class Meta(Module):
    name = "meta"
    free_form = True
    runs_on_controller = True
    args = {"cmd": Arg(str, required=True, choices=ACTIONS)}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        action = str(args.get("cmd"))
        if action not in ACTIONS:
            return result(failed=True, msg=f"meta: unknown action {action!r} (one of {', '.join(ACTIONS)})")
        return result(msg=action.replace("_", " "), meta=action)
