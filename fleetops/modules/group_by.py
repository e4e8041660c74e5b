"""`group_by`: put the host in a group named from its variables (`key: os_{{ ansible_distribution }}`)
so that later plays can target it; the executor adds the membership for the rest of the run."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result


class GroupBy(Module):
    name = "group_by"
    runs_on_controller = True
    args = {"key": Arg(str, required=True), "parents": Arg((str, list), default="all")}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        group = str(args["key"]).strip().replace(" ", "-")     # as ansible-core's group_by
        parents = args.get("parents") or "all"
        parents = [parents] if isinstance(parents, str) else [str(p) for p in parents]
        parents = [p.strip().replace(" ", "-") for p in parents if str(p).strip()]
        if not group:
            return result(failed=True, msg="the 'key' argument renders to an empty group name")
        return result(changed=False, add_group=group, parent_groups=parents)
