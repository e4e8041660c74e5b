"""`dnf`: RPM packages present, absent or latest through the host's dnf, with
ansible.builtin.dnf's everyday arguments and aliases (`pkg`, `expire-cache`). A change needs
root: the task says `become: true`, as it would for ansible-core."""
from __future__ import annotations

from fleetops.errors import BadInput
from fleetops.engine.module import Arg, Module, TaskContext
from fleetops.modules.package import run_package

ALIASES = {"pkg": "name", "expire-cache": "update_cache"}


class Dnf(Module):
    name = "dnf"
    args = {
        "name": Arg((str, list)), "pkg": Arg((str, list)),
        "state": Arg(str, choices=("absent", "installed", "latest", "present", "removed")),
        "update_cache": Arg(bool, default=False), "expire-cache": Arg(bool),
        "disable_gpg_check": Arg(bool, default=False),
        "enablerepo": Arg((str, list)), "disablerepo": Arg((str, list)),
        "releasever": Arg(str), "installroot": Arg(str), "conf_file": Arg(str),
        # the `dnf` command fleetops drives is dnf 4's (yum 4 is the same program); dnf5 is not
        "use_backend": Arg(str, default="auto", choices=("auto", "dnf", "dnf4", "yum", "yum4")),
    }

    @classmethod
    def check_static(cls, args: dict, where: str) -> None:
        for alias, own in ALIASES.items():
            if args.get(alias) is not None and args.get(own) not in (None, False):
                raise BadInput(f"dnf: '{own}' and '{alias}' are the same argument; give one", where=where)

    def run(self, ctx: TaskContext, args: dict) -> dict:
        for alias, own in ALIASES.items():
            if args.get(alias) is not None:
                args[own] = args.pop(alias)
        args = {k: v for k, v in args.items() if k not in ALIASES and k != "use_backend"}
        return run_package(ctx, args, "dnf")
