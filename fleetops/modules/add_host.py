"""`add_host`: a host (and its groups and variables) added to the run's inventory, for the plays
after this one; once per task, not per host, as ansible.builtin.add_host. Every argument but the
name and groups becomes a variable of the host (`ansible_host`, `ansible_port`, ...)."""
from __future__ import annotations

import re

from fleetops.engine.module import Arg, Module, TaskContext, result

NAMES = ("name", "hostname", "host")         # the first given names the host, as ansible-core
GROUPS = ("groupname", "groups", "group")
SPECIAL = ("name", "hostname", "groupname", "groups")   # ansible-core keeps `host` and `group` as variables too
_HOST_PORT = re.compile(r"^(?P<host>[^:\[\]]+):(?P<port>\d+)$|^\[(?P<v6>[^\]]+)\](?::(?P<v6port>\d+))?$")


class AddHost(Module):
    name = "add_host"
    runs_on_controller = True
    bypass_host_loop = True
    any_args = True            # every other key is a variable of the new host
    args = {**{n: Arg(str) for n in NAMES}, **{g: Arg((str, list)) for g in GROUPS}}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        name = next((args[k] for k in NAMES if args.get(k) not in (None, "")), None)
        if name is None:
            return result(failed=True, msg="name, host or hostname needs to be provided")
        host_vars = {k: args[k] for k in sorted(args) if k not in SPECIAL}   # by name, as ansible-core hands them
        m = _HOST_PORT.match(str(name))
        if m:
            name = m.group("host") or m.group("v6")
            port = m.group("port") or m.group("v6port")
            if port:
                host_vars["ansible_ssh_port"] = int(port)
        given = next((args[k] for k in GROUPS if args.get(k) not in (None, "")), [])
        listed = given.split(",") if isinstance(given, str) else [str(g) for g in given]
        groups: list = []
        for g in (x.strip() for x in listed):
            if g and g not in groups:
                groups.append(g)
        return result(changed=False, add_host={"host_name": str(name), "groups": groups, "host_vars": host_vars})
