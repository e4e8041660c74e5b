"""`systemd` (and its newer name `systemd_service`): a system, user or global unit started,
stopped, restarted or reloaded, enabled or disabled, masked or unmasked, after an optional
daemon-reload, with ansible.builtin.systemd_service's arguments, aliases and decisions (a
task with only `name` reads the unit's properties into `status`, as there). A system unit needs root: the task says `become: true`, as it would for ansible-core."""
from __future__ import annotations

from fleetops.errors import BadInput
from fleetops.engine.module import Arg, Module, TaskContext

STATES = ("started", "stopped", "restarted", "reloaded")
# ansible-core's aliases: the one name each stands for
ALIASES = {"service": "name", "unit": "name", "daemon-reload": "daemon_reload", "daemon-reexec": "daemon_reexec"}


def canonical(args) -> dict:
    """Arguments under their own names; an alias given beside its name is refused by check_static."""
    out = {}
    for k, v in dict(args).items():
        out.setdefault(ALIASES.get(k, k), v)
    return out


class Systemd(Module):
    name = "systemd"
    args = {
        "name": Arg(str), "service": Arg(str), "unit": Arg(str),
        "state": Arg(str, choices=STATES),
        "enabled": Arg(bool), "masked": Arg(bool), "force": Arg(bool),
        "daemon_reload": Arg(bool), "daemon-reload": Arg(bool),
        "daemon_reexec": Arg(bool), "daemon-reexec": Arg(bool),
        "scope": Arg(str, default="system", choices=("system", "user", "global")),
        "no_block": Arg(bool, default=False),
    }

    @classmethod
    def check_static(cls, args: dict, where: str) -> None:
        seen: dict = {}
        for k in args:
            own = ALIASES.get(k, k)
            if own in seen:
                kw = args.key_where(k) if hasattr(args, "key_where") else where
                raise BadInput(f"{cls.name}: '{seen[own]}' and '{k}' are the same argument; give one", where=kw)
            seen[own] = k
        given = canonical(args)
        for k in ("state", "enabled", "masked"):
            if given.get(k) is not None and given.get("name") is None:
                raise BadInput(f"{cls.name}: '{k}' needs 'name'", where=where)

    def run(self, ctx: TaskContext, args: dict) -> dict:
        pargs = {k: v for k, v in canonical(args).items() if v is not None}
        return ctx.payload("systemd", pargs)


class SystemdService(Systemd):
    name = "systemd_service"
