"""`debug`: show a message or a variable's value in the run's results."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result
from fleetops.engine.templating import TemplateError


class Debug(Module):
    name = "debug"
    runs_on_controller = True
    args = {"msg": Arg((str, int, float, bool, list, dict)), "var": Arg(str), "verbosity": Arg(int, default=0)}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        if args.get("var"):
            name = str(args["var"])
            try:
                value = ctx.templar.evaluate(name, ctx.variables)
            except TemplateError as exc:
                # as ansible-core: an undefined name is shown, any other failure fails the task
                if not (getattr(exc, "variable", None) or exc.msg.startswith("undefined variable")):
                    return result(failed=True, msg=exc.msg)
                value = "VARIABLE IS NOT DEFINED!"
            return result(msg=f"{name}: {value!r}" if not isinstance(value, str) else f"{name}: {value}",
                          **{name: value})
        msg = args.get("msg")
        return result(msg="Hello world!" if msg is None else (msg if isinstance(msg, str) else repr(msg)),
                      **({} if isinstance(msg, str) or msg is None else {"value": msg}))
