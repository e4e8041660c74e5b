"""`shell`: run a command line through `/bin/sh -c` on the host (pipes, globs, variables)."""
from __future__ import annotations

import shlex

from fleetops.engine.module import Arg, Module, TaskContext, result
from fleetops.modules.command import COMMON_ARGS, run_program


class Shell(Module):
    name = "shell"
    free_form = True
    args = {**COMMON_ARGS, "executable": Arg(str, default="/bin/sh")}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        cmd = args.get("cmd")
        if not cmd:
            return result(failed=True, msg="no command given")
        shell = args.get("executable") or "/bin/sh"
        line = f"{shlex.quote(shell)} -c {shlex.quote(str(cmd))}"
        return run_program(ctx, args, line, str(cmd))
