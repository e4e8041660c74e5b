"""Builds the model from what a parser declares: groups, children (no cycles), hosts and their
variables, then reconciles `all`, `ungrouped`, depths and each host's groups as ansible-core does.

Both formats and every file of an inventory directory feed one builder, so a YAML file and its
INI twin give the same inventory.
"""
from __future__ import annotations

from fleetops.engine.inventory.model import Group, Host, Inventory
from fleetops.engine.yamlsrc import plain
from fleetops.errors import BadInput


class Builder:
    """Collects groups and hosts as a parser reads them, then reconciles like Ansible."""

    def __init__(self, path: str):
        self.inv = Inventory(path)
        self._members: dict = {}           # group -> its hosts as a set: a membership test per host line
        self.group("all")
        self.group("ungrouped")

    def group(self, name, where=None) -> Group:
        if not isinstance(name, str) or not name.strip():
            raise BadInput(f"group name must be a non-empty string, got {name!r}", where=where)
        g = self.inv.groups.get(name)
        if g is None:
            g = self.inv.groups[name] = Group(name, where)
        elif g.where is None:
            g.where = where
        return g

    def add_child(self, parent: str, child: str, where=None) -> None:
        if child == "all":
            raise BadInput(f"group 'all' cannot be a child of group '{parent}'", where=where)
        p, c = self.inv.groups[parent], self.inv.groups[child]
        if child in p.children:
            return
        path = self._path_down(child, parent)
        if path is not None:
            cycle = " -> ".join([parent] + path)
            raise BadInput(f"group '{parent}' would be its own ancestor: {cycle}", where=where)
        p.children.append(child)
        c.parents.append(parent)

    def _path_down(self, start: str, target: str):
        """A child-path from start to target (inclusive), or None."""
        stack = [(start, [start])]
        seen = set()
        while stack:
            name, path = stack.pop()
            if name == target:
                return path
            if name in seen:
                continue
            seen.add(name)
            for ch in self.inv.groups[name].children:
                stack.append((ch, path + [ch]))
        return None

    def set_group_var(self, group: str, key, value, where=None) -> None:
        g = self.inv.groups[group]
        if key == "ansible_group_priority":
            if isinstance(value, bool):
                value = None
            try:
                g.priority = int(value)
            except (TypeError, ValueError):
                raise BadInput(f"group '{group}': ansible_group_priority must be an integer, got {value!r}",
                               where=where) from None
            return
        g.inventory_vars[key] = plain(value)
        g.inventory_where[key] = where

    def add_host(self, name: str, group: str, variables: dict, wheres: dict, where=None) -> None:
        if not name:
            raise BadInput("empty host name", where=where)
        host = self.inv.hosts.get(name)
        if host is None:
            host = self.inv.hosts[name] = Host(name, where)
        g = self.inv.groups[group]
        members = self._members.get(group)
        if members is None:
            members = self._members[group] = set(g.hosts)
        if name not in members:
            members.add(name)
            g.hosts.append(name)
        for key, value in variables.items():
            host.inventory_vars[key] = plain(value)
            host.inventory_where[key] = wheres.get(key, where)

    def finish(self) -> Inventory:
        inv = self.inv
        all_group, ungrouped = inv.groups["all"], inv.groups["ungrouped"]
        for name, g in inv.groups.items():
            if name != "all" and not g.parents:
                g.parents.append("all")
        # creation order, the same for a YAML file and its INI twin
        all_group.children = [n for n, g in inv.groups.items() if "all" in g.parents]
        # depth: longest path from `all` (Ansible bumps a child below its deepest parent)
        depth = {"all": 0}

        def depth_of(name):
            if name not in depth:
                depth[name] = max(depth_of(p) for p in inv.groups[name].parents) + 1
            return depth[name]
        for name, g in inv.groups.items():
            g.depth = depth_of(name)
        member_of: dict = {h: set() for h in inv.hosts}
        for name, g in inv.groups.items():
            for h in g.hosts:
                member_of[h].add(name)
        # `ungrouped` holds exactly the hosts in no other group, wherever they were first listed
        ungrouped.hosts = [h for h in ungrouped.hosts if not (member_of[h] - {"all", "ungrouped"})]
        in_ungrouped = set(ungrouped.hosts)
        for h, groups in member_of.items():
            groups.discard("ungrouped")
            if not (groups - {"all"}) and h not in in_ungrouped:
                in_ungrouped.add(h)
                ungrouped.hosts.append(h)
        inv.all_own_hosts = list(all_group.hosts)
        all_group.hosts = list(inv.hosts)
        for h, groups in member_of.items():
            if h in in_ungrouped:
                groups.add("ungrouped")
            closure = set()
            todo = list(groups) + ["all"]
            while todo:
                gname = todo.pop()
                if gname not in closure:
                    closure.add(gname)
                    todo.extend(inv.groups[gname].parents)
            inv.hosts[h].groups = sorted(closure, key=lambda n: inv.groups[n].sort_key())
        return inv
