"""The inventory model: groups, hosts and ansible-core's variable precedence between them.

What a host's variables are, which groups it is in and in what order, is decided here once;
the parsers only declare groups, hosts and variables (builder.py).
"""
from __future__ import annotations

import copy
import ipaddress
import os
import sys

from fleetops.engine import patterns as _patterns
from fleetops.engine.connection import hostvars as _hostvars
from fleetops.engine.connection.transport import ConnDefaults, ConnParams
from fleetops.engine.inventory.vars_dirs import find_vars_files, read_vars_file
from fleetops.errors import BadInput


class _Declared:
    """A group's or host's own variables by source: the inventory file's, then group_vars/ or
    host_vars/ over them (the order ansible-core applies them)."""

    def __init__(self, name: str, where: str | None = None):
        self.name = name
        self.where = where                 # first declaration, "file:line:col"
        self.inventory_vars: dict = {}     # from the inventory file (later declarations win)
        self.inventory_where: dict = {}
        self.file_vars: dict = {}          # from group_vars/<name> or host_vars/<name>
        self.file_where: dict = {}

    @property
    def vars(self) -> dict:
        merged = dict(self.inventory_vars)
        merged.update(self.file_vars)
        return merged

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


_IMMUTABLE = (str, int, float, bool, type(None))


class Group(_Declared):
    """A group: its own members, its place in the tree and its variables by source."""

    def __init__(self, name: str, where: str | None = None):
        super().__init__(name, where)
        self.hosts: list[str] = []         # direct members, declaration order
        self.children: list[str] = []
        self.parents: list[str] = []
        self.depth = 0                     # longest path from `all`
        self.priority = 1                  # ansible_group_priority (inventory file only)

    def sort_key(self):
        return (self.depth, self.priority, self.name)


class Host(_Declared):
    """A host: its own variables by source and every group it is in."""

    def __init__(self, name: str, where: str | None = None):
        super().__init__(name, where)
        self.groups: list[str] = []        # incl. ancestors and `all`, sorted like Ansible's sort_groups


class Inventory:
    """Hosts and groups of one inventory file, with Ansible's variable resolution."""

    def __init__(self, path: str):
        self.path = path
        self.hosts: dict[str, Host] = {}
        self.groups: dict[str, Group] = {}
        self.all_own_hosts: list[str] = []   # hosts listed directly under `all`
        self.implicit: dict[str, Host] = {}  # the implicit localhost, once a pattern asked for it
        # ansible.cfg's remote_user / private_key_file / timeout: below every host variable
        self.conn_defaults = ConnDefaults()
        self.ssh_configs: dict = {}       # parsed ~/.ssh/config files, by path (connection/hostvars.py)
        self.vars_base: str | None = None    # where group_vars/ and host_vars/ are read from
        self._groups_map: dict | None = None  # groups_map(), until a group changes

    # -- variables

    def _host(self, hostname: str) -> Host:
        host = self.hosts.get(hostname) or self.implicit.get(hostname)
        if host is None:
            raise BadInput(f"unknown host '{hostname}' (not in the inventory)", where=self.path)
        return host

    def implicit_host(self, name: str) -> Host:
        """ansible-core's implicit localhost: a `localhost` / `127.0.0.1` pattern that matches no
        inventory host gives this one, a local connection with the controller's Python, in no
        group but `all` (whose variables it gets) and never part of `all`'s hosts."""
        host = self.implicit.get(name)
        if host is None:
            host = self.implicit[name] = Host(name, self.path)
            host.groups = ["all"]
            host.inventory_vars = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
        return host

    def _layers(self, hostname: str):
        """(vars, where) pairs lowest precedence first, as ansible-core's VariableManager merges them.

        Ansible order: inventory-file vars of `all`, inventory-file vars of the
        host's other groups, group_vars/all, group_vars/<group>, inventory-file
        host vars, host_vars/<host>. Groups sort by depth, priority, name.
        """
        host = self._host(hostname)
        groups = [self.groups[g] for g in host.groups if g != "all"]
        all_group = self.groups["all"]
        yield all_group.inventory_vars, all_group.inventory_where
        for g in groups:
            yield g.inventory_vars, g.inventory_where
        yield all_group.file_vars, all_group.file_where
        for g in groups:
            yield g.file_vars, g.file_where
        yield host.inventory_vars, host.inventory_where
        yield host.file_vars, host.file_where

    def get_vars(self, hostname: str) -> dict:
        """Every inventory variable of a host (a deep copy), plus the inventory magic vars."""
        out: dict = {}
        for layer, _ in self._layers(hostname):
            out.update(layer)
        for key, value in out.items():
            if not isinstance(value, _IMMUTABLE):     # most inventory values are scalars: no copy needed
                out[key] = copy.deepcopy(value)
        host = self._host(hostname)
        out["inventory_hostname"] = hostname
        out["inventory_hostname_short"] = short_name(hostname)
        out["group_names"] = sorted(g for g in host.groups if g != "all")
        return out

    def var_origins(self, hostname: str) -> dict:
        """Where each of a host's variables was set ("file:line:col" or "file"), for error lines."""
        out: dict = {}
        for layer, where in self._layers(hostname):
            for key in layer:
                out[key] = where.get(key)
        return out

    # -- groups and patterns

    def group_hosts(self, name: str) -> list[str]:
        """All hosts of a group and its descendants, in Ansible's order: own hosts first, then
        each child's breadth first (for `all`: its own hosts, `ungrouped`, then the groups)."""
        seen: set = set()
        out: list[str] = []
        order = [name]
        i = 0
        while i < len(order):
            for child in self.groups[order[i]].children:
                if child not in order:
                    order.append(child)
            i += 1
        for gname in order:
            members = self.all_own_hosts if gname == "all" else self.groups[gname].hosts
            for h in members:
                if h not in seen:
                    seen.add(h)
                    out.append(h)
        return out

    def groups_map(self) -> dict:
        """Ansible's `groups` magic variable: group name -> host names (incl. `all`, `ungrouped`).
        Made once and kept until a group changes (add_to_group): every host's connection
        variables read it, and remaking it per host made a fleet's set-up quadratic. Callers
        read it, never change it."""
        if self._groups_map is None:
            self._groups_map = {name: self.group_hosts(name) for name in self.groups}
        return self._groups_map

    def add_to_group(self, hostname: str, group: str, parents=("all",)) -> bool:
        """A group made while a playbook runs (group_by), as ansible-core's strategy adds it: the group
        (and each parent, under `all`) created if new, the group made a child of every parent, the host
        a member. True when anything changed."""
        changed = False
        self._groups_map = None
        for name in list(parents) + [group]:
            if name not in self.groups:
                g = self.groups[name] = Group(name)
                g.parents = ["all"]
                g.depth = 1
                self.groups["all"].children.append(name)
                directory = os.path.join(self.vars_base, "group_vars") if self.vars_base else None
                for f in find_vars_files(directory, name) if directory and os.path.isdir(directory) else ():
                    data, wheres = read_vars_file(f)        # group_vars/<new group>, as ansible-core
                    g.file_vars.update(data)
                    g.file_where.update(wheres)
                changed = True
        g = self.groups[group]
        for parent in parents:
            if parent != "all" and parent not in g.parents:
                if "all" in g.parents:
                    g.parents.remove("all")
                    self.groups["all"].children.remove(group)
                g.parents.append(parent)
                self.groups[parent].children.append(group)
                g.depth = max(g.depth, self.groups[parent].depth + 1)
                changed = True
        if hostname not in g.hosts:
            g.hosts.append(hostname)
            changed = True
        host = self._host(hostname)
        closure, todo = set(host.groups), [group]
        while todo:
            name = todo.pop()
            if name not in closure:
                closure.add(name)
                todo.extend(self.groups[name].parents)
        host.groups = sorted(closure, key=lambda n: self.groups[n].sort_key())
        return changed

    def add_host_at_run_time(self, name: str, groups: list, host_vars: dict) -> bool:
        """add_host, as ansible-core's InventoryManager.add_dynamic_host: the host (new ones under
        `all`, in `ungrouped` while in no other group), its own variables merged with `host_vars`,
        and a member of each of `groups` (made under `all` when new). True when anything changed."""
        self._groups_map = None
        host = self.hosts.get(name)
        changed = host is None
        if host is None:
            host = self.hosts[name] = Host(name, self.path)
            host.groups = ["all"]
            self.all_own_hosts.append(name)
        merged = {**host.inventory_vars, **host_vars}
        if merged != host.inventory_vars:
            host.inventory_vars = merged
            changed = True
        for group in groups:
            changed |= self.add_to_group(name, group)
        ungrouped = self.groups.get("ungrouped")
        if ungrouped is not None:
            alone = not set(host.groups) - {"all", "ungrouped"}
            if alone and name not in ungrouped.hosts:
                self.add_to_group(name, "ungrouped")
            elif not alone and name in ungrouped.hosts:
                ungrouped.hosts.remove(name)
                host.groups = [g for g in host.groups if g != "ungrouped"]
        return changed

    def select(self, pattern: str) -> list:
        """Host names matching an Ansible host pattern, in inventory order."""
        return _patterns.match(pattern, self)

    def template_vars(self, hostname: str, extra_vars: dict | None = None) -> dict:
        """What a connection variable may template: the host's inventory variables, the magic
        variables known before any task (groups, ansible_playbook_python) and -e, which wins."""
        out = self.get_vars(hostname)
        out["groups"] = self.groups_map()
        out["ansible_playbook_python"] = sys.executable
        out.update(extra_vars or {})
        return out

    def connection_params(self, hostname: str, ssh_config_path: str | None = None, render=None,
                          extra_vars: dict | None = None, remote_user: str | None = None,
                          connection: str | None = None) -> ConnParams:
        """How to reach a host: engine/connection/hostvars.py resolves it from its variables."""
        return _hostvars.connection_params(hostname, self.get_vars(hostname), self.var_origins(hostname),
                                           where=self.path, defaults=self.conn_defaults,
                                           ssh_configs=self.ssh_configs, ssh_config_path=ssh_config_path,
                                           render=render, extra_vars=extra_vars, remote_user=remote_user,
                                           connection=connection)


def short_name(hostname: str) -> str:
    """inventory_hostname_short: the name up to its first dot, but an IP address whole (as Ansible)."""
    if ":" not in hostname and hostname.strip("0123456789."):   # neither IPv6 nor IPv4 can be
        return hostname.split(".", 1)[0]
    try:
        ipaddress.ip_address(hostname)
        return hostname
    except ValueError:
        return hostname.split(".", 1)[0]
