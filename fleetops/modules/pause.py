"""`pause`: wait `seconds` or `minutes` before the next task (a rolling restart's settle time).

It waits on the controller and wakes early when the run is stopped. A `pause` that waits for
the operator (a prompt and no time) is refused when the playbook is loaded: a fleet run is
unattended and never stops to ask.
"""
from __future__ import annotations

import time

from fleetops.errors import BadInput
from fleetops.engine.module import Arg, Module, TaskContext, result


class Pause(Module):
    name = "pause"
    runs_on_controller = True
    args = {"seconds": Arg((int, float, str)), "minutes": Arg((int, float, str)), "prompt": Arg(str),
            "echo": Arg(bool, default=True)}

    @staticmethod
    def check_static(args: dict, where: str) -> None:
        if args.get("seconds") is None and args.get("minutes") is None:
            raise BadInput("pause without seconds or minutes waits for a key press: a fleetops run is "
                           "unattended and never stops to ask; give seconds or minutes", where=where)
        if args.get("seconds") is not None and args.get("minutes") is not None:
            raise BadInput("pause: give seconds or minutes, not both", where=where)

    def run(self, ctx: TaskContext, args: dict) -> dict:
        raw, unit = (args["seconds"], 1) if args.get("seconds") is not None else (args["minutes"], 60)
        try:
            wait = float(raw) * unit
        except (TypeError, ValueError):
            return result(failed=True, msg=f"pause: {raw!r} is not a number of {'seconds' if unit == 1 else 'minutes'}")
        if wait < 0:
            return result(failed=True, msg=f"pause: cannot wait a negative time ({raw})")
        start = time.time()
        stop = ctx.stop
        interrupted = stop.wait(wait) if stop is not None else bool(time.sleep(wait))
        delta = round(time.time() - start, 3)
        if interrupted:
            return result(failed=True, msg=f"pause interrupted after {delta} seconds: the run was stopped")
        return result(msg="", delta=delta, rc=0, echo=bool(args.get("echo", True)), user_input="",
                      start=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(start)),
                      stop=time.strftime("%Y-%m-%d %H:%M:%S"), stdout=f"Paused for {delta} seconds")
