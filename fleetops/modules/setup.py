"""`setup` and `gather_facts` as tasks: the host's facts, gathered as the play's fact gathering
gathers them (the `facts` payload, as the login user), narrowed by `filter` as ansible-core's
setup narrows them (shell-style patterns over the `ansible_`-prefixed names)."""
from __future__ import annotations

import fnmatch

from fleetops.engine.module import Arg, Module, TaskContext, result


def _names(value) -> list:
    if value is None:
        return []
    if isinstance(value, str):
        return [x.strip() for x in value.split(",") if x.strip()]
    return [str(x) for x in value]


class Setup(Module):
    name = "setup"
    uses_become = False
    args = {"gather_subset": Arg((list, str), default=None), "filter": Arg((list, str), default=None),
            "gather_timeout": Arg(int, default=10), "fact_path": Arg(str, default="/etc/ansible/facts.d")}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        res = ctx.payload("facts", {})
        if res.get("failed"):
            return dict(res)
        facts = dict(res.get("ansible_facts") or {})
        patterns = _names(args.get("filter"))
        if patterns:
            facts = {k: v for k, v in facts.items()
                     if any(fnmatch.fnmatch(k, p) or fnmatch.fnmatch(k, "ansible_" + p) for p in patterns)}
        facts["gather_subset"] = _names(args.get("gather_subset")) or ["all"]
        facts["module_setup"] = True
        return result(ansible_facts=facts)


class GatherFactsTask(Setup):
    name = "gather_facts"
    args = {**Setup.args, "parallel": Arg(bool, default=None)}
