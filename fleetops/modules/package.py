"""`package`: packages present, absent or latest through the host's package manager, as
ansible.builtin.package hands the task to the host's own package module (apt, else dnf; a host
with neither fails the task with that reason)."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext

STATES = ("present", "installed", "absent", "removed", "latest")
COMMON_ARGS = {
    "name": Arg((str, list)),
    "state": Arg(str, default="present", choices=STATES),
}


def run_package(ctx: TaskContext, args: dict, manager: str | None) -> dict:
    """One `package` payload call; check mode decides without changing the host."""
    pargs = {k: v for k, v in args.items() if v is not None}
    pargs["manager"] = manager
    return ctx.payload("package", pargs, timeout=1800)


class Package(Module):
    name = "package"
    args = dict(COMMON_ARGS, use=Arg(str, default="auto", choices=("auto", "apt", "dnf")))

    def run(self, ctx: TaskContext, args: dict) -> dict:
        use = args.pop("use", "auto") or "auto"
        manager = None if use == "auto" else use
        return run_package(ctx, args, manager)
