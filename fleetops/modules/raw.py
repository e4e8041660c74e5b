"""`raw`: a command line handed to the host's login shell as it is, no Python needed there
(ansible.builtin.raw: bootstrapping a host, or one whose python3 is broken). With `executable`,
the line runs under that shell's `-c`. Always `changed`; skipped under --check, as ansible-core."""
from __future__ import annotations

import shlex

from fleetops.engine.connection.become import become_failure, become_wrap
from fleetops.engine.module import Arg, Module, TaskContext, result


class Raw(Module):
    name = "raw"
    free_form = True
    args = {"cmd": Arg(str), "executable": Arg(str)}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        cmd = args.get("cmd")
        if not cmd:
            return result(failed=True, msg="no command given")
        if ctx.check:
            return result(skipped=True, msg="raw does not run in check mode")
        line = str(cmd)
        if args.get("executable"):
            line = f"{shlex.quote(str(args['executable']))} -c {shlex.quote(line)}"
        if ctx.become_user:
            line = become_wrap(line, ctx.become_user)
        res = ctx.transport.run(line)
        out = res.stdout.decode("utf-8", errors="replace")
        err = res.stderr.decode("utf-8", errors="replace")
        why = become_failure(ctx.become_user, res.rc, res.stderr)
        failed = res.rc != 0
        msg = why or ("non-zero return code" if failed else "")
        return result(changed=True, failed=failed, msg=msg, rc=res.rc, stdout=out, stderr=err,
                      stdout_lines=out.splitlines(), stderr_lines=err.splitlines())
