"""`file`: a path's state (file, directory, link, hard, touch, absent), its mode (octal or
symbolic), owner, group and times, with ansible.builtin.file's arguments and decisions, in one
payload call."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, one_of

PATH_NAMES = ("path", "dest", "name")        # Ansible's aliases of `path`
STATES = ("absent", "directory", "file", "hard", "link", "touch")
PASSED = ("state", "src", "recurse", "follow", "force", "mode", "owner", "group", "modification_time",
          "modification_time_format", "access_time", "access_time_format")


class File(Module):
    name = "file"
    args = {
        "path": Arg(str), "dest": Arg(str), "name": Arg(str),
        "state": Arg(str, choices=STATES),
        "src": Arg(str),                  # state: link/hard: what the link points to
        "recurse": Arg(bool, default=False),
        "follow": Arg(bool, default=True),
        "force": Arg(bool, default=False),
        "mode": Arg((str, int)),
        "owner": Arg((str, int)),
        "group": Arg((str, int)),
        "modification_time": Arg(str), "modification_time_format": Arg(str, default="%Y%m%d%H%M.%S"),
        "access_time": Arg(str), "access_time_format": Arg(str, default="%Y%m%d%H%M.%S"),
        "unsafe_writes": Arg(bool, default=False),   # accepted as ansible-core does; every write here is atomic
    }

    @staticmethod
    def check_static(args: dict, where: str) -> None:
        one_of(args, PATH_NAMES, "file", where)

    def run(self, ctx: TaskContext, args: dict) -> dict:
        pargs = {k: args.get(k) for k in PASSED}
        pargs["path"] = next(args[k] for k in PATH_NAMES if args.get(k) is not None)
        res = ctx.payload("file", pargs)
        if not ctx.diff:
            res.pop("diff", None)
        return res
