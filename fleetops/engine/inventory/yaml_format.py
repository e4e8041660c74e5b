"""The YAML inventory format: groups with hosts, children and vars.

Where ansible-core only warns (a misspelt key in a group) this stops with BadInput: a silently
dropped host is worse than one error line for a fleet repair tool.
"""
from __future__ import annotations

from typing import cast

from fleetops.engine.inventory.builder import Builder
from fleetops.engine.inventory.hostnames import expand_host_range, split_host_port
from fleetops.engine.yamlsrc import Mapping, load_yaml_text, yaml_kind
from fleetops.errors import BadInput

GROUP_KEYS = ("hosts", "children", "vars")


def parse_yaml(b: Builder, text: str, path: str) -> None:
    data = load_yaml_text(text, path)
    if data is None:
        return
    if not isinstance(data, dict):
        raise BadInput(f"a YAML inventory must be a mapping of groups (such as 'all:'), got {yaml_kind(data)}",
                       where=getattr(data, "where", None) or path)
    data = cast(Mapping, data)      # the loader's mappings know where their keys are
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


def _yaml_group(b: Builder, name, data, where) -> str:
    if not isinstance(name, str):
        raise BadInput(f"group name must be a string, got {name!r}", where=where)
    b.group(name, where)
    if data is None:
        return name
    if not isinstance(data, dict):
        raise BadInput(f"group '{name}' must be a mapping with hosts, children or vars, got {yaml_kind(data)}",
                       where=where)
    data = cast(Mapping, data)
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
