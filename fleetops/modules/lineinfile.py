"""`lineinfile`: one line present (added or replaced) or absent in a host's text file, with
ansible.builtin.lineinfile's decisions, `backup`, `create`, `validate` and check mode."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, one_of

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
        one_of(args, PATH_NAMES, "lineinfile", where)

    def run(self, ctx: TaskContext, args: dict) -> dict:
        pargs = {k: args.get(k) for k in self.args if k not in PATH_NAMES}
        pargs["path"] = next(args[k] for k in PATH_NAMES if args.get(k) is not None)
        res = ctx.payload("lineinfile", pargs)
        if not ctx.diff:
            res.pop("diff", None)
        return res
