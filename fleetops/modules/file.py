"""`file`: a path's state (directory, absent, touch, file, link) and mode/owner, in one payload call."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext


class File(Module):
    name = "file"
    args = {
        "path": Arg(str, required=True),
        "state": Arg(str, default="file", choices=("directory", "absent", "touch", "file", "link")),
        "src": Arg(str),                  # state: link: what the link points to
        "mode": Arg((str, int)),
        "owner": Arg((str, int)),
        "group": Arg((str, int)),
        "force": Arg(bool, default=False),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        pargs = {k: args.get(k) for k in ("path", "state", "mode", "owner", "group", "force", "src")}
        res = ctx.payload("file", pargs)
        if not ctx.diff:
            res.pop("diff", None)
        return res
