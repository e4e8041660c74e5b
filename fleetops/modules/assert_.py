"""`assert`: check conditions on the controller, failing the host when one is false."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result
from fleetops.engine.taskrun import evaluate_condition
from fleetops.engine.templating import TemplateError


class Assert(Module):
    name = "assert"
    runs_on_controller = True
    condition_args = ("that",)
    args = {
        "that": Arg((list, str, bool), required=True),
        "fail_msg": Arg(str),
        "msg": Arg(str),
        "success_msg": Arg(str, default="All assertions passed"),
        "quiet": Arg(bool, default=False),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        that = args["that"]
        conditions = that if isinstance(that, list) else [that]
        for cond in conditions:
            try:
                ok = evaluate_condition(ctx.templar, cond, ctx.variables)
            except TemplateError as e:
                return result(failed=True, msg=f"assertion {cond!r} could not be evaluated: {e}", assertion=cond)
            if not ok:
                msg = args.get("fail_msg") or args.get("msg") or f"Assertion failed: {cond}"
                return result(failed=True, msg=msg, assertion=cond, evaluated_to=False)
        return result(msg="" if args.get("quiet") else args.get("success_msg") or "All assertions passed")
