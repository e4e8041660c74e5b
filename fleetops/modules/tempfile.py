"""`tempfile`: a new temporary file or directory on the host (ansible.builtin.tempfile), its path
in the result for later tasks; ansible-test's setup_remote_tmp_dir is built on it."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result


class TempFile(Module):
    name = "tempfile"
    args = {
        "state": Arg(str, default="file", choices=("file", "directory")),
        "path": Arg(str),
        "prefix": Arg(str, default="ansible."),
        "suffix": Arg(str, default=""),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        if ctx.check:   # as ansible-core: the module does not support check mode, so it is skipped
            return result(skipped=True, msg="remote module (tempfile) does not support check mode")
        return ctx.payload("tempfile", {k: args.get(k) for k in self.args})
