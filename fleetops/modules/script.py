"""`script`: a local script copied to the host and run there with its arguments, as
ansible.builtin.script: found like copy's `src` (the role's files/, then the playbook's),
`creates`/`removes`, an absolute `chdir`, `executable`. One command: the script arrives on stdin
into a fresh 0700 directory, runs with no stdin of its own, and the directory goes with it."""
from __future__ import annotations

import os
import secrets
import shlex

from fleetops.engine.module import Arg, Module, TaskContext, result
from fleetops.modules.command import program_result, run_line
from fleetops.modules.copy import find_source


class Script(Module):
    name = "script"
    free_form = True
    args = {"cmd": Arg(str), "creates": Arg(str), "removes": Arg(str), "chdir": Arg(str),
            "executable": Arg(str), "decrypt": Arg(bool, default=True)}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        raw = str(args.get("cmd") or "").strip()
        if not raw:
            return result(failed=True, msg="one of the following is required: _raw_params, cmd")
        for key, want in (("creates", False), ("removes", True)):
            path = args.get(key)
            if path and (run_line(ctx, f"test -e {shlex.quote(str(path))}").rc == 0) != want:
                what = "exists, matching creates option" if not want else "does not exist, matching removes option"
                return result(skipped=True, msg=f"{path} {what}")
        chdir = args.get("chdir")
        if chdir and not str(chdir).startswith("/"):
            return result(failed=True, msg=f"chdir {chdir} must be an absolute path for a Unix-aware remote node")
        first = shlex.split(raw)[0]
        source = find_source(ctx, first, "files")
        if source is None or not os.path.isfile(source):
            return result(failed=True, msg=f"Could not find or access '{first}' on the Ansible Controller.")
        if ctx.check:
            if args.get("creates") or args.get("removes"):
                return result(changed=True)
            return result(skipped=True, msg="Check mode is not supported for this task.")
        with open(source, "rb") as f:
            content = f.read()
        where = f"/tmp/.fleetops-script-{secrets.token_hex(8)}"      # a literal path: quoted arguments may hold it
        target = f"{where}/{os.path.basename(source)}"
        command = raw.replace(first, target, 1)
        if args.get("executable"):
            command = f"{args['executable']} {command}"
        cd = f"cd {shlex.quote(str(chdir))} && " if chdir else ""
        line = (f"mkdir -m 0700 {where} || exit 1; trap 'rm -rf {where}' EXIT; "
                f"cat > {shlex.quote(target)} && chmod 0700 {shlex.quote(target)} && {cd}{command} </dev/null")
        res = run_line(ctx, line, stdin=content, main=True, shown=raw)
        out = program_result(ctx.become_user, raw, res)
        if out.get("failed") and res.rc != 0 and not res.timed_out:
            out["msg"] = "non-zero return code"
        return out
