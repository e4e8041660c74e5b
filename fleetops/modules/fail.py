"""`fail`: fail the host with a message (as ansible.builtin.fail)."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result


class Fail(Module):
    name = "fail"
    runs_on_controller = True
    args = {"msg": Arg((str, int, float, bool, list, dict), default="Failed as requested from task")}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        msg = args.get("msg")
        return result(failed=True, msg="Failed as requested from task" if msg is None else
                      (msg if isinstance(msg, str) else repr(msg)))
