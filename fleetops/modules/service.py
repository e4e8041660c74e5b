"""`service`: a service started, stopped, restarted or reloaded and enabled or disabled through
the host's systemd, as ansible.builtin.service hands the task to its systemd module there. The
SysV-only arguments (`pattern`, `sleep`, `arguments`, `runlevel`) mean nothing to systemd and
are dropped with a warning, as ansible-core drops them; a host whose PID 1 is not systemd
fails the task with systemctl's own reason."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext
from fleetops.modules.systemd import STATES

UNUSED = ("pattern", "runlevel", "sleep", "arguments", "args")


class Service(Module):
    name = "service"
    args = {
        "name": Arg(str, required=True),
        "state": Arg(str, choices=STATES),
        "enabled": Arg(bool),
        "pattern": Arg(str), "runlevel": Arg(str), "sleep": Arg(int),
        "arguments": Arg(str), "args": Arg(str),
        "use": Arg(str, default="auto", choices=("auto", "systemd")),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        pargs = {k: args[k] for k in ("name", "state", "enabled") if args.get(k) is not None}
        res = ctx.payload("systemd", pargs)
        dropped = [k for k in UNUSED if args.get(k) is not None]
        if dropped:
            res.setdefault("warnings", []).extend(f'Ignoring "{k}" as it is not used in "systemd"' for k in dropped)
        return res
