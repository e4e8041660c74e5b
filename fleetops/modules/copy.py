"""`copy`: put content (inline or a controller file) on the host, atomically and idempotently.

All host work is one `copy` payload call: the payload compares by sha256,
writes through a temp file + rename and reports changed/diff, so a second run
with the same input reports changed=false and touches nothing.
"""
from __future__ import annotations

import base64
import os

from fleetops.engine.module import Arg, Module, TaskContext, flag, result

MAX_CONTENT = 32 * 1024 * 1024


# where a file goes and what it becomes there: shared by copy and template
DEST_ARGS = {
    "dest": Arg(str, required=True),
    "mode": Arg((str, int)),
    "owner": Arg((str, int)),
    "group": Arg((str, int)),
    "backup": Arg(bool, default=False),
    "force": Arg(bool, default=True),     # false: an existing dest is left as it is
}


def find_source(ctx: TaskContext, src: str, subdir: str) -> str | None:
    """Controller file for `src`: absolute, else the task's role (`<role>/<subdir>/`, the role,
    its tasks/), then `<subdir>/` or beside the playbook, else the project's (as ansible-core)."""
    src = os.path.expanduser(str(src))
    if os.path.isabs(src):
        return src if os.path.exists(src) else None
    base = ctx.project_dir or os.getcwd()
    role = ctx.role_path
    in_role = (os.path.join(role, subdir, src), os.path.join(role, src),
               os.path.join(role, "tasks", src)) if role else ()
    for cand in in_role + (os.path.join(base, subdir, src), os.path.join(base, src),
                 os.path.join(os.path.dirname(os.path.abspath(base)), subdir, src),
                 os.path.join(os.getcwd(), subdir, src)):
        if os.path.exists(cand):
            return cand
    return None


def put_content(ctx: TaskContext, args: dict, content: bytes, basename: str | None, payload: str = "copy") -> dict:
    """One round trip of the `payload` (copy or template) that makes `dest` hold `content` with the
    wanted attributes."""
    if len(content) > MAX_CONTENT:
        return result(failed=True, msg=f"content is {len(content)} bytes; copy handles up to {MAX_CONTENT}")
    pargs = {
        "dest": args["dest"],
        "content_b64": base64.b64encode(content).decode("ascii"),
        "basename": basename,
        "mode": args.get("mode"),
        "owner": args.get("owner"),
        "group": args.get("group"),
        "backup": bool(args.get("backup")),
        "force": flag(args.get("force", True)),
    }
    res = ctx.payload(payload, pargs)
    if not ctx.diff:
        res.pop("diff", None)
    return res


class Copy(Module):
    name = "copy"
    args = {
        "content": Arg((str, int, float, dict, list)),
        "src": Arg(str),
        **DEST_ARGS,
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        has_content = args.get("content") is not None
        if has_content == bool(args.get("src")):
            return result(failed=True, msg="give exactly one of content or src")
        if has_content:
            content = args["content"]
            if isinstance(content, (dict, list)):
                import json
                content = json.dumps(content, indent=2, sort_keys=True) + "\n"
            data, basename = str(content).encode("utf-8"), None
        else:
            path = find_source(ctx, args["src"], "files")
            if path is None:
                return result(failed=True, msg=f"src {args['src']} not found (looked in files/ and beside the playbook)")
            if os.path.isdir(path):
                return result(failed=True, msg=f"src {path} is a directory; copy takes one file")
            with open(path, "rb") as f:
                data = f.read()
            basename = os.path.basename(path)
        return put_content(ctx, args, data, basename)
