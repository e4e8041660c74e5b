"""`systemd_user`: a unit of the remote user's systemd manager (`systemctl --user`).

One `systemd_user` payload call per task. Where no user manager answers (no systemd,
lingering off, containers such as the lab) the task is skipped with `manager: false`
instead of failing, so a playbook registers it and takes another path; a task with no
`name` is just that probe.
"""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result


class SystemdUser(Module):
    name = "systemd_user"
    args = {
        "name": Arg(str),
        "state": Arg(str, choices=("started", "stopped", "restarted")),
        "enabled": Arg(bool),
        "daemon_reload": Arg(bool, default=False),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        if (args.get("state") or args.get("enabled") is not None) and not args.get("name"):
            return result(failed=True, msg="name is required with state or enabled")
        pargs = {k: args.get(k) for k in ("name", "state", "enabled", "daemon_reload")}
        return ctx.payload("systemd_user", pargs)
