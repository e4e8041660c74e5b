"""`set_fact`: set host variables from the task's (rendered) arguments.

They rank above play and task vars and below extra vars, last for the run,
and are visible to other hosts through `hostvars`.
"""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result


class SetFact(Module):
    name = "set_fact"
    runs_on_controller = True
    any_args = True            # every key is a variable name
    args = {"cacheable": Arg(bool, default=False)}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        facts = {k: v for k, v in args.items() if k != "cacheable"}
        if not facts:
            return result(failed=True, msg="set_fact needs at least one variable")
        return result(ansible_facts=facts)
