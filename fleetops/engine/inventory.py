"""Ansible-compatible inventory: YAML or INI, plus group_vars/ and host_vars/ beside it.

Existing Ansible inventories must work unchanged, so parsing, host ranges, value
literals and variable precedence follow ansible-core (checked against 2.19).
Where Ansible only warns (a misspelt key in a YAML group) we stop with BadInput:
a silently dropped host is worse than one error line for a fleet repair tool.
"""
from __future__ import annotations

import ast
import copy
import ipaddress
import os
import re
import shlex
import string
import sys
import warnings

from fleetops.engine import patterns as _patterns
from fleetops.engine.connection import sshargs as _sshargs
from fleetops.engine.connection import sshconfig as _sshconfig
from fleetops.engine.connection.transport import ConnParams
from fleetops.engine.templating import TemplateError
from fleetops.engine.varsfile import load_vars_file
from fleetops.engine.yamlsrc import Mapping, load_yaml_text, yaml_kind
from fleetops.errors import BadInput

VARS_EXTENSIONS = (".yml", ".yaml", ".json")
YAML_EXTENSIONS = (".yml", ".yaml", ".json")
INI_EXTENSIONS = (".ini",)
GROUP_KEYS = ("hosts", "children", "vars")


# --------------------------------------------------------------------------- model

class Group:
    """A group: its own members, its place in the tree and its variables by source."""

    def __init__(self, name: str, where: str | None = None):
        self.name = name
        self.where = where                 # first declaration, "file:line:col"
        self.hosts: list[str] = []         # direct members, declaration order
        self.children: list[str] = []
        self.parents: list[str] = []
        self.depth = 0                     # longest path from `all`
        self.priority = 1                  # ansible_group_priority (inventory file only)
        self.inventory_vars: dict = {}     # from the inventory file
        self.inventory_where: dict = {}
        self.file_vars: dict = {}          # from group_vars/<name>
        self.file_where: dict = {}

    @property
    def vars(self) -> dict:
        """Inventory-file vars overlaid by group_vars/ (the order Ansible applies them)."""
        merged = dict(self.inventory_vars)
        merged.update(self.file_vars)
        return merged

    def sort_key(self):
        return (self.depth, self.priority, self.name)

    def __repr__(self) -> str:
        return f"Group({self.name!r})"


class Host:
    """A host: its own variables by source and every group it is in."""

    def __init__(self, name: str, where: str | None = None):
        self.name = name
        self.where = where
        self.groups: list[str] = []        # incl. ancestors and `all`, sorted like Ansible's sort_groups
        self.inventory_vars: dict = {}     # from the inventory file (later declarations win)
        self.inventory_where: dict = {}
        self.file_vars: dict = {}          # from host_vars/<name>
        self.file_where: dict = {}

    @property
    def vars(self) -> dict:
        """The host's own merged vars: inventory file, then host_vars/."""
        merged = dict(self.inventory_vars)
        merged.update(self.file_vars)
        return merged

    def __repr__(self) -> str:
        return f"Host({self.name!r})"


class Inventory:
    """Hosts and groups of one inventory file, with Ansible's variable resolution."""

    def __init__(self, path: str):
        self.path = path
        self.hosts: dict[str, Host] = {}
        self.groups: dict[str, Group] = {}
        self.all_own_hosts: list[str] = []   # hosts listed directly under `all`
        self.implicit: dict[str, Host] = {}  # the implicit localhost, once a pattern asked for it
        # ansible.cfg's remote_user / private_key_file / timeout: below every host variable
        self.conn_defaults: dict = {}
        self._ssh_configs: dict = {}
        self.vars_base: str | None = None    # where group_vars/ and host_vars/ are read from

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
        out = copy.deepcopy(out)
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
        """Ansible's `groups` magic variable: group name -> host names (incl. `all`, `ungrouped`)."""
        return {name: self.group_hosts(name) for name in self.groups}

    def add_to_group(self, hostname: str, group: str, parents=("all",)) -> bool:
        """A group made while a playbook runs (group_by), as ansible-core's strategy adds it: the group
        (and each parent, under `all`) created if new, the group made a child of every parent, the host
        a member. True when anything changed."""
        changed = False
        for name in list(parents) + [group]:
            if name not in self.groups:
                g = self.groups[name] = Group(name)
                g.parents = ["all"]
                g.depth = 1
                self.groups["all"].children.append(name)
                directory = os.path.join(self.vars_base, "group_vars") if self.vars_base else None
                for f in _find_vars_files(directory, name) if directory and os.path.isdir(directory) else ():
                    data, wheres = _load_vars_file(f)        # group_vars/<new group>, as ansible-core
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

    def select(self, pattern: str) -> list:
        """Host names matching an Ansible host pattern, in inventory order."""
        return _patterns.match(pattern, self)

    # -- connection

    def template_vars(self, hostname: str, extra_vars: dict | None = None) -> dict:
        """What a connection variable may template: the host's inventory variables, the magic
        variables known before any task (groups, ansible_playbook_python) and -e, which wins."""
        out = self.get_vars(hostname)
        out["groups"] = self.groups_map()
        out["ansible_playbook_python"] = sys.executable
        out.update(extra_vars or {})
        return out

    def connection_params(self, hostname: str, ssh_config_path: str | None = None,
                          render=None, extra_vars: dict | None = None,
                          remote_user: str | None = None) -> ConnParams:
        """Resolve how to reach a host: -e > fleetops_* vars > ansible_* vars > ssh_config > defaults.

        As in Ansible, `-e ansible_host=...` (or port, user, key file) changes where fleetops
        connects, and a play's or task's `remote_user` applies only where no user variable is set. `render` templates a templated value (the caller passes its Jinja2 renderer
        over `template_vars`); without it a templated connection variable is BadInput.
        """
        variables = self.get_vars(hostname)
        origins = self.var_origins(hostname)
        for key, value in (extra_vars or {}).items():
            variables[key] = value
            origins[key] = "-e"

        def pick(*names):
            for n in names:
                value = variables.get(n)
                if value is None or value == "":
                    continue
                if isinstance(value, str) and ("{{" in value or "{%" in value):
                    if render is None:
                        raise BadInput(f"host '{hostname}': connection variable '{n}' is a template "
                                       f"({value!r}) and nothing here can render it",
                                       where=origins.get(n) or self.path)
                    try:
                        value = render(value)
                    except TemplateError as exc:
                        raise BadInput(f"host '{hostname}': connection variable '{n}': {exc.msg} (inventory "
                                       "variables, -e, groups and ansible_playbook_python apply here)",
                                       where=origins.get(n) or self.path) from None
                return n, value
            return None, None

        def bad(name, msg):
            return BadInput(f"host '{hostname}': variable '{name}' {msg}", where=origins.get(name) or self.path)

        def as_str(name, value):
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise bad(name, f"must be a string, got {yaml_kind(value)}")
            return str(value)

        host_var, host_value = pick("fleetops_host", "ansible_host", "ansible_ssh_host")
        lookup_key = as_str(host_var, host_value) if host_var else hostname
        ssh = _sshconfig.lookup(lookup_key, ssh_config_path, cache=self._ssh_configs)

        port_var, port_value = pick("fleetops_port", "ansible_port", "ansible_ssh_port")
        if port_var:
            port = _int_port(port_value)
            if port is None:
                raise bad(port_var, f"must be an integer port 1-65535, got {port_value!r}")
        else:
            port = ssh.port or 22

        user_var, user_value = pick("fleetops_user", "ansible_user", "ansible_ssh_user")
        user = as_str(user_var, user_value) if user_var else (
            remote_user or self.conn_defaults.get("remote_user") or ssh.user)

        key_var, key_value = pick("fleetops_ssh_private_key_file", "fleetops_private_key_file",
                                  "ansible_ssh_private_key_file", "ansible_private_key_file")
        key_file = os.path.expanduser(as_str(key_var, key_value)) if key_var else (
            self.conn_defaults.get("private_key_file") or ssh.identity_file)

        py_var, py_value = pick("fleetops_python_interpreter", "ansible_python_interpreter")
        become_var, become_value = pick("fleetops_become_user", "ansible_become_user")
        jump_var, jump_value = pick("fleetops_proxy_jump")
        kh_var, kh_value = pick("fleetops_known_hosts")

        params = ConnParams(
            name=hostname,
            address=ssh.hostname or lookup_key,
            port=port,
            user=user,
            key_file=key_file,
            python=as_str(py_var, py_value) if py_var else None,
            become_user=as_str(become_var, become_value) if become_var else None,
            proxy_jump=as_str(jump_var, jump_value) if jump_var else ssh.proxy_jump,
            known_hosts=os.path.expanduser(as_str(kh_var, kh_value)) if kh_var else None,
        )
        if self.conn_defaults.get("timeout"):
            params.connect_timeout = float(self.conn_defaults["timeout"])
        sources = list(self.conn_defaults.get("ssh_args") or [])        # ansible.cfg [ssh_connection]
        for var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
            name, value = pick(var)
            if name:
                sources.append((as_str(name, value), origins.get(name) or self.path))
        if sources:
            keep = {f for f, var in (("port", port_var), ("user", user_var), ("key_file", key_var),
                                     ("proxy_jump", jump_var), ("known_hosts", kh_var)) if var}
            _sshargs.apply(params, sources, keep)
        conn_var, conn_value = pick("ansible_connection")
        if conn_var:
            params.connection = as_str(conn_var, conn_value)
        bvar, bvalue = pick("fleetops_become", "ansible_become")
        if bvar:
            flag = _bool(bvalue)
            if flag is None:
                raise bad(bvar, f"must be true or false, got {bvalue!r}")
            params.become = flag
        for var, attr in (("fleetops_connect_timeout", "connect_timeout"),
                          ("fleetops_command_timeout", "command_timeout")):
            name, value = pick(var)
            if name:
                seconds = _positive_number(value)
                if seconds is None:
                    raise bad(name, f"must be a number of seconds > 0, got {value!r}")
                setattr(params, attr, seconds)
        return params


def short_name(hostname: str) -> str:
    """inventory_hostname_short: the name up to its first dot, but an IP address whole (as Ansible)."""
    try:
        ipaddress.ip_address(hostname)
        return hostname
    except ValueError:
        return hostname.split(".", 1)[0]


def _bool(value):
    """true/false as YAML, INI and -e spell them (true, yes, on, 1 / false, no, off, 0); else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "yes", "on", "1"):
            return True
        if v in ("false", "no", "off", "0"):
            return False
    return None


def _int_port(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 1 <= value <= 65535:
        return value
    return None


def _positive_number(value):
    if isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 else None


def _plain(value):
    """Drop position bookkeeping: plain dicts and lists for variables handed to others."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


# --------------------------------------------------------------------------- host names and ranges

_RANGE_RE = re.compile(r"\[[^\[\]]*:[^\[\]]*\]")


def expand_host_range(pattern: str, where: str | None = None) -> list:
    """Expand Ansible host ranges: web[01:03] -> web01..web03, db[a:c], n[0:10:5]."""
    m = _RANGE_RE.search(pattern)
    if not m:
        return [pattern]
    head, body, tail = pattern[:m.start()], pattern[m.start() + 1:m.end() - 1], pattern[m.end():]
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        raise BadInput(f"bad host range '{pattern}': must be [begin:end] or [begin:end:step]", where=where)
    beg, end = bounds[0] or "0", bounds[1]
    step_text = bounds[2] if len(bounds) == 3 else "1"
    if not end:
        raise BadInput(f"bad host range '{pattern}': no end value", where=where)
    try:
        step = int(step_text)
        if step < 1:
            raise ValueError
    except ValueError:
        raise BadInput(f"bad host range '{pattern}': step must be a positive integer", where=where) from None
    if beg in string.ascii_letters and end in string.ascii_letters:
        i_beg, i_end = string.ascii_letters.index(beg), string.ascii_letters.index(end)
        if i_beg > i_end:
            raise BadInput(f"bad host range '{pattern}': begin is after end", where=where)
        seq = list(string.ascii_letters[i_beg:i_end + 1:step])
    else:
        if not (beg.isdigit() and end.isdigit()):
            raise BadInput(f"bad host range '{pattern}': bounds must be numbers or single letters",
                           where=where)
        if beg[0] == "0" and len(beg) > 1 and len(beg) != len(end):
            raise BadInput(f"bad host range '{pattern}': zero-padded begin and end must have equal length",
                           where=where)
        if int(beg) > int(end):
            raise BadInput(f"bad host range '{pattern}': begin is after end", where=where)
        width = len(beg) if beg[0] == "0" and len(beg) > 1 else 0
        seq = [str(i).zfill(width) for i in range(int(beg), int(end) + 1, step)]
    out = []
    for item in seq:
        out.extend(expand_host_range(head + item + tail, where))
    return out


_PORT_RE = re.compile(r"^(?P<host>.+):(?P<port>\d+)$")


def split_host_port(text: str):
    """'host:22' -> ('host', 22); '[::1]:22' -> ('::1', 22); bare IPv6 and ranges have no port."""
    text = text.strip()
    m = re.match(r"^\[([0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)\](?::(\d+))?$", text)
    if m:
        return m.group(1), int(m.group(2)) if m.group(2) else None
    m = _PORT_RE.match(text)
    if m and ":" not in _RANGE_RE.sub("", m.group("host")):
        return m.group("host"), int(m.group("port"))
    return text, None


# --------------------------------------------------------------------------- building

class _Builder:
    """Collects groups and hosts as a parser reads them, then reconciles like Ansible."""

    def __init__(self, path: str):
        self.inv = Inventory(path)
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
        g.inventory_vars[key] = _plain(value)
        g.inventory_where[key] = where

    def add_host(self, name: str, group: str, variables: dict, wheres: dict, where=None) -> None:
        if not name:
            raise BadInput("empty host name", where=where)
        host = self.inv.hosts.get(name)
        if host is None:
            host = self.inv.hosts[name] = Host(name, where)
        g = self.inv.groups[group]
        if name not in g.hosts:
            g.hosts.append(name)
        for key, value in variables.items():
            host.inventory_vars[key] = _plain(value)
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
        for h, groups in member_of.items():
            groups.discard("ungrouped")
            if not (groups - {"all"}) and h not in ungrouped.hosts:
                ungrouped.hosts.append(h)
        inv.all_own_hosts = list(all_group.hosts)
        all_group.hosts = list(inv.hosts)
        for h, groups in member_of.items():
            if h in ungrouped.hosts:
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


# --------------------------------------------------------------------------- YAML inventory

def _parse_yaml(b: _Builder, text: str, path: str) -> None:
    data = load_yaml_text(text, path)
    if data is None:
        return
    if not isinstance(data, dict):
        raise BadInput(f"a YAML inventory must be a mapping of groups (such as 'all:'), got {yaml_kind(data)}",
                       where=getattr(data, "where", None) or path)
    if isinstance(data.get("plugin"), str):
        raise BadInput(f"inventory plugin configuration (plugin: {data['plugin']}) is not supported: "
                       "fleetops reads INI and YAML inventories", where=data.key_where("plugin"))
    for name, gdata in data.items():
        _yaml_group(b, name, gdata, data.key_where(name))


def _sub_mapping(data: Mapping, key: str, group: str):
    """hosts/children/vars of a group: None, a mapping, or (Ansible shorthand) one name."""
    value = data[key]
    where = data.key_where(key)
    if value is None:
        return None
    if isinstance(value, str) and key != "vars":
        d = Mapping({value: None})
        d.set_where(value, where)
        return d
    if not isinstance(value, dict):
        what = {"hosts": "host names to their variables", "children": "child group names",
                "vars": "variable names to values"}[key]
        raise BadInput(f"'{key}' of group '{group}' must be a mapping of {what}, got {yaml_kind(value)}",
                       where=where)
    return value


def _yaml_group(b: _Builder, name, data, where) -> str:
    if not isinstance(name, str):
        raise BadInput(f"group name must be a string, got {name!r}", where=where)
    b.group(name, where)
    if data is None:
        return name
    if not isinstance(data, dict):
        raise BadInput(f"group '{name}' must be a mapping with hosts, children or vars, got {yaml_kind(data)}",
                       where=where)
    for key in data:
        if key not in GROUP_KEYS:
            raise BadInput(f"unknown key '{key}' in group '{name}' (expected hosts, children or vars)",
                           where=data.key_where(key))
    for key in data:
        section = _sub_mapping(data, key, name)
        if section is None:
            continue
        if key == "vars":
            for var, value in section.items():
                b.set_group_var(name, var, value, section.key_where(var))
        elif key == "children":
            for child, child_data in section.items():
                child_where = section.key_where(child)
                child_name = _yaml_group(b, child, child_data, child_where)
                b.add_child(name, child_name, child_where)
        else:
            for pattern, host_vars in section.items():
                h_where = section.key_where(pattern)
                if not isinstance(pattern, str):
                    pattern = str(pattern)
                if host_vars is None:
                    host_vars = Mapping()
                elif not isinstance(host_vars, dict):
                    raise BadInput(f"host '{pattern}' in group '{name}' must be a mapping of variables "
                                   f"or empty, got {yaml_kind(host_vars)}", where=h_where)
                base, port = split_host_port(pattern)
                names = expand_host_range(base, h_where)
                variables = dict(host_vars)
                wheres = {k: host_vars.key_where(k) for k in host_vars}
                if port is not None:
                    variables["ansible_port"] = port
                    wheres["ansible_port"] = h_where
                for h in names:
                    b.add_host(h, name, variables, wheres, h_where)
    return name


# --------------------------------------------------------------------------- INI inventory

_SECTION_RE = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")
_GROUPNAME_RE = re.compile(r"^([^:\]\s]+)\s*(?:[#;].*)?$")


def parse_ini_value(text: str):
    """Ansible's INI value rule: a Python literal if it is one (5, True, 'x', [1]), else the string."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def _parse_ini(b: _Builder, text: str, path: str) -> None:
    group, state = "ungrouped", "hosts"
    declared: set = {"all", "ungrouped"}
    pending_vars: dict = {}        # group -> where of its first [g:vars]
    pending_children: dict = {}    # child -> (parent, where)
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        col = len(raw) - len(raw.lstrip()) + 1
        where = f"{path}:{lineno}:{col}"
        m = _SECTION_RE.match(line)
        if m:
            group, state = m.group(1), m.group(2) or "hosts"
            if state not in ("hosts", "children", "vars"):
                raise BadInput(f"section [{group}:{state}] has unknown type '{state}' "
                               f"(expected [{group}], [{group}:children] or [{group}:vars])", where=where)
            b.group(group, where)
            if state == "vars":
                if group not in declared:
                    pending_vars.setdefault(group, where)
            else:
                declared.add(group)
            continue
        first = line.split()[0]
        if line.startswith("[") and (line.endswith("]") or first.count("[") != first.count("]")):
            # a host line may start with a range ([a:f]web.example.org); an unclosed one is neither
            raise BadInput(f"invalid section header '{line}' (expected [group], [group:children] "
                           f"or [group:vars], without spaces)", where=where)
        if state == "hosts":
            _ini_host_line(b, group, raw, line, where, path, lineno)
        elif state == "vars":
            if "=" not in line:
                raise BadInput(f"expected key=value in [{group}:vars], got '{line}'", where=where)
            key, value = (part.strip() for part in line.split("=", 1))
            if not key:
                raise BadInput(f"missing variable name in [{group}:vars]: '{line}'", where=where)
            b.set_group_var(group, key, parse_ini_value(value), where)
        else:
            cm = _GROUPNAME_RE.match(line)
            if not cm:
                raise BadInput(f"expected a group name in [{group}:children], got '{line}'", where=where)
            child = cm.group(1)
            b.group(child, where)
            b.add_child(group, child, where)
            pending_children.setdefault(child, (group, where))
    for child, (parent, where) in pending_children.items():
        if child not in declared:
            raise BadInput(f"section [{parent}:children] includes undefined group '{child}'", where=where)
    for group, where in pending_vars.items():
        if group not in declared:
            raise BadInput(f"section [{group}:vars] is for undefined group '{group}'", where=where)


def _ini_host_line(b: _Builder, group: str, raw: str, line: str, where: str, path: str, lineno: int) -> None:
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as e:
        raise BadInput(f"cannot parse host line '{line}': {e}", where=where) from None
    if not tokens:
        return
    base, port = split_host_port(tokens[0])
    names = expand_host_range(base, where)
    variables: dict = {}
    wheres: dict = {}
    for token in tokens[1:]:
        if "=" not in token:
            at = raw.find(token)
            raise BadInput(f"expected key=value host variable, got '{token}'",
                           where=f"{path}:{lineno}:{at + 1}" if at >= 0 else where)
        key, value = token.split("=", 1)
        if not key:
            raise BadInput(f"missing variable name in '{token}'", where=where)
        variables[key] = parse_ini_value(value)
        at = raw.find(key + "=")
        wheres[key] = f"{path}:{lineno}:{at + 1}" if at >= 0 else where
    if port is not None:
        variables["ansible_port"] = port
        wheres["ansible_port"] = where
    for h in names:
        b.add_host(h, group, variables, wheres, where)


# --------------------------------------------------------------------------- group_vars / host_vars

def _find_vars_files(directory: str, name: str) -> list:
    """Ansible's lookup: the first of <name>, <name>.yml, .yaml, .json; a directory is read recursively."""
    base = os.path.join(directory, name)
    for ext in ("",) + VARS_EXTENSIONS:
        candidate = base + ext
        if os.path.isdir(candidate):
            return _dir_vars_files(candidate)
        if os.path.exists(candidate):
            return [candidate]
    return []


def _dir_vars_files(directory: str) -> list:
    found = []
    for entry in sorted(os.listdir(directory)):
        if entry.startswith(".") or entry.endswith("~"):
            continue
        full = os.path.join(directory, entry)
        ext = os.path.splitext(entry)[1]
        if os.path.isdir(full) and not ext:
            found.extend(_dir_vars_files(full))
        elif os.path.isfile(full) and (not ext or ext in VARS_EXTENSIONS):
            found.append(full)
    return found


def _load_vars_file(path: str):
    """One group_vars/host_vars file -> (plain vars, where-by-key); names are not checked."""
    data = load_vars_file(path, check_names=False)
    return _plain(data), {k: data.key_where(k) for k in data}


def _load_vars_dirs(inv: Inventory, base: str) -> None:
    for kind, items in (("group_vars", inv.groups), ("host_vars", inv.hosts)):
        directory = os.path.join(base, kind)
        if not os.path.isdir(directory):
            continue
        for name, obj in items.items():
            for f in _find_vars_files(directory, name):
                data, wheres = _load_vars_file(f)
                obj.file_vars.update(data)
                obj.file_where.update(wheres)


# --------------------------------------------------------------------------- entry point

def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise BadInput("file not found", where=path) from None
    except IsADirectoryError:
        raise BadInput("is a directory, expected a file", where=path) from None
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror}", where=path) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise BadInput("not UTF-8 text", where=f"{path}:{line}") from None


_YAML_LINE_RE = re.compile(r"^(---|\{|[^\s=#;\[][^=]*:\s*(#.*)?$)")


def detect_format(path: str, text: str) -> str:
    """'yaml' or 'ini': by extension, else by the first meaningful line."""
    ext = os.path.splitext(path)[1].lower()
    if ext in YAML_EXTENSIONS:
        return "yaml"
    if ext in INI_EXTENSIONS:
        return "ini"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        return "yaml" if _YAML_LINE_RE.match(line) else "ini"
    return "ini"


# what ansible-core skips in an inventory directory (its INVENTORY_IGNORE_EXTS default)
IGNORED_EXTENSIONS = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig",
                      ".cfg", ".retry")
VARS_DIRS = ("group_vars", "host_vars")


def inventory_files(directory: str) -> list:
    """The inventory files of a directory, as ansible-core reads it: sorted, subdirectories
    recursed, hidden and ignored-extension files, group_vars/ and host_vars/ left out."""
    found = []
    for entry in sorted(os.listdir(directory)):
        full = os.path.join(directory, entry)
        if entry.startswith(".") or entry.endswith(IGNORED_EXTENSIONS):
            continue
        if os.path.isdir(full):
            if entry not in VARS_DIRS:
                found.extend(inventory_files(full))
        elif os.path.isfile(full):
            found.append(full)
    return found


def load_inventory(path: str) -> Inventory:
    """Load an inventory file (YAML or INI), or every inventory file of a directory, and the
    group_vars/, host_vars/ beside the file (or inside the directory)."""
    path = os.fspath(path)
    b = _Builder(path)
    if os.path.isdir(path):
        files, base = inventory_files(path), path
        if not files:
            raise BadInput("inventory directory holds no inventory file", where=path)
    else:
        files, base = [path], os.path.dirname(path)
    for f in files:
        text = _read_text(f)
        if detect_format(f, text) == "yaml":
            _parse_yaml(b, text, f)
        else:
            _parse_ini(b, text, f)
    inv = b.finish()
    inv.vars_base = base
    _load_vars_dirs(inv, base)
    return inv
