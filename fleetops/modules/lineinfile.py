"""`lineinfile`: one line present (added or replaced) or absent in a host's text file, with
ansible.builtin.lineinfile's decisions, `backup`, `create`, `validate` and check mode."""
from __future__ import annotations

from fleetops.errors import BadInput
from fleetops.engine.module import Arg, Module, TaskContext

PATH_NAMES = ("path", "dest", "name")        # Ansible's aliases of `path`


class LineInFile(Module):
    name = "lineinfile"
    args = {
        "path": Arg(str), "dest": Arg(str), "name": Arg(str),
        "line": Arg(str), "regexp": Arg(str), "search_string": Arg(str),
        "state": Arg(str, default="present", choices=("present", "absent")),
        "insertafter": Arg(str), "insertbefore": Arg(str),
        "backrefs": Arg(bool, default=False), "firstmatch": Arg(bool, default=False),
        "create": Arg(bool, default=False), "backup": Arg(bool, default=False),
        "validate": Arg(str), "mode": Arg((str, int)),
    }

    @staticmethod
    def check_static(args: dict, where: str) -> None:
        given = [k for k in PATH_NAMES if args.get(k) is not None]
        if not given:
            raise BadInput("module 'lineinfile' needs argument 'path' (or its alias 'dest')", where=where)
        if len(given) > 1:
            kw = args.key_where(given[1]) if hasattr(args, "key_where") else where
            raise BadInput(f"lineinfile: '{given[0]}' and '{given[1]}' are the same argument; give one", where=kw)

    def run(self, ctx: TaskContext, args: dict) -> dict:
        pargs = {k: args.get(k) for k in self.args if k not in PATH_NAMES}
        pargs["path"] = next(args[k] for k in PATH_NAMES if args.get(k) is not None)
        res = ctx.payload("lineinfile", pargs)
        if not ctx.diff:
            res.pop("diff", None)
        return res
