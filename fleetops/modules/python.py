"""`python`: run one host-side payload from fleetops/remote/ (by its registered name or dotted
path) and return its result.

This is how a playbook reaches any stdlib-only host capability (SQLite
versions, an application's state) in one round trip without writing a module.
"""
from __future__ import annotations

from fleetops.engine import payload
from fleetops.errors import BadInput
from fleetops.engine.module import Arg, Module, TaskContext, result

REMOTE_DIR = payload.REMOTE_DIR


class Python(Module):
    name = "python"
    args = {"payload": Arg(str, required=True), "args": Arg(dict, default=None), "timeout": Arg((int, float))}

    @staticmethod
    def check_static(args: dict, where: str) -> None:
        """Names starting with _ (_check, _diff) are the engine's: no playbook sets them."""
        pargs = args.get("args")
        if isinstance(pargs, dict):
            for k in pargs:
                if isinstance(k, str) and k.startswith("_"):
                    kw = pargs.key_where(k) if hasattr(pargs, "key_where") else where
                    raise BadInput(f"python: argument {k!r} of payload {args.get('payload')!r}: names starting "
                                   "with _ are the engine's (check and diff mode come from the run)", where=kw)

    def run(self, ctx: TaskContext, args: dict) -> dict:
        name = str(args["payload"])
        if name.endswith(".py"):
            name = name[:-3]
        if not payload.resolve(name, REMOTE_DIR):
            return result(failed=True, msg=f"no payload {name!r} in fleetops/remote/")
        pargs = dict(args.get("args") or {})
        reserved = sorted(k for k in pargs if isinstance(k, str) and k.startswith("_"))
        if reserved:
            return result(failed=True, msg=f"payload {name}: argument {reserved[0]!r}: names starting with _ are "
                                           "the engine's (check and diff mode come from the run)")
        res = ctx.payload(name, pargs, timeout=args.get("timeout"))
        if not isinstance(res, dict):
            return result(failed=True, msg=f"payload {name} returned {type(res).__name__}, not a dict")
        out = result(changed=bool(res.get("changed")), failed=bool(res.get("failed")),
                     skipped=bool(res.get("skipped")), msg=str(res.get("msg") or ""))
        out.update({k: v for k, v in res.items() if k not in out})
        return out
