"""`apt`: Debian packages present, absent or latest, with the cache refreshed when older than
`cache_valid_time` (ansible.builtin.apt's everyday arguments)."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext
from fleetops.modules.package import COMMON_ARGS, run_package


class Apt(Module):
    name = "apt"
    # ansible-core's apt takes no 'installed'/'removed' (package and dnf do)
    args = dict(COMMON_ARGS, state=Arg(str, default="present", choices=("present", "absent", "latest")),
                update_cache=Arg(bool), cache_valid_time=Arg(int),
                install_recommends=Arg(bool), purge=Arg(bool, default=False))

    def run(self, ctx: TaskContext, args: dict) -> dict:
        return run_package(ctx, args, "apt")
