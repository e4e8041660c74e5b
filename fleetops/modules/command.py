"""`command`: run a program on the host without a shell.

Every argv element is quoted with shlex.quote, so `$HOME`, `;` or `*` in an
argument reach the program literally: what the playbook says is what runs.
`shell` shares the option handling below and differs only in the command line.
"""
from __future__ import annotations

import shlex

from fleetops.modules.base import Arg, Module, TaskContext, result


def quote_path(path: str) -> str:
    """shlex.quote a host path, keeping a leading `~/` meaning the remote user's home."""
    path = str(path)
    if path == "~":
        return '"$HOME"'
    if path.startswith("~/"):
        return '"$HOME"/' + shlex.quote(path[2:])
    return shlex.quote(path)


def become_user(ctx: TaskContext) -> str | None:
    return (ctx.extra or {}).get("become_user")


def run_line(ctx: TaskContext, line: str, stdin: bytes | None = None, timeout: float | None = None,
             max_output: int | None = None):
    """Run an already-quoted command line on the task's transport, through sudo when become is on."""
    if become_user(ctx):
        from fleetops.engine.ssh import become_wrap
        line = become_wrap(line, become_user(ctx))
    if max_output:
        return ctx.transport.run(line, stdin=stdin, timeout=timeout, max_output=max_output)
    return ctx.transport.run(line, stdin=stdin, timeout=timeout)


def _text(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\n") else text


COMMON_ARGS = {
    "cmd": Arg(str),
    "chdir": Arg(str),
    "creates": Arg(str),
    "removes": Arg(str),
    "stdin": Arg(str),
    "stdin_add_newline": Arg(bool, default=True),
    "timeout": Arg((int, float)),
}


def run_program(ctx: TaskContext, args: dict, line: str, shown: str) -> dict:
    """creates/removes, check mode, chdir, stdin: the same for command and shell."""
    for key, want_exists in (("creates", False), ("removes", True)):
        path = args.get(key)
        if path:
            probe_line = f"test -e {quote_path(path)}"
            if args.get("chdir") and not str(path).startswith(("/", "~")):
                probe_line = f"cd {quote_path(args['chdir'])} && {probe_line}"
            probe = run_line(ctx, probe_line)
            exists = probe.rc == 0
            if exists != want_exists:
                why = f"{path} exists" if exists else f"{path} does not exist"
                return result(msg=f"skipped, since {why}", cmd=shown, rc=0, stdout="", stderr="",
                              stdout_lines=[], stderr_lines=[])
    if ctx.check:
        return result(skipped=True, msg=f"would run: {shown}", cmd=shown)
    if args.get("chdir"):
        line = f"cd {quote_path(args['chdir'])} && {line}"
    stdin = None
    if args.get("stdin") is not None:
        text = str(args["stdin"])
        if args.get("stdin_add_newline", True) and not text.endswith("\n"):
            text += "\n"
        stdin = text.encode()
    from fleetops.engine.ssh import MAX_COMMAND_OUTPUT, become_failure, size_text
    res = run_line(ctx, line, stdin=stdin, timeout=args.get("timeout"), max_output=MAX_COMMAND_OUTPUT)
    out, err = _text(res.stdout), _text(res.stderr)
    why = become_failure(become_user(ctx), res.rc, res.stderr)
    if res.timed_out:
        msg = f"timed out: {shown}"
    elif why:
        msg = why
    elif res.rc != 0:
        msg = f"non-zero return code {res.rc}"
    else:
        msg = ""
    extra = {}
    dropped = {name: n for name, n in (("stdout", getattr(res, "stdout_dropped", 0)),
                                       ("stderr", getattr(res, "stderr_dropped", 0))) if n}
    if dropped:
        note = "; ".join(f"{name} truncated: kept the first {size_text(MAX_COMMAND_OUTPUT)}, "
                         f"discarded {n} more bytes" for name, n in dropped.items())
        msg = f"{msg}; {note}" if msg else note
        extra = {f"{name}_truncated": n for name, n in dropped.items()}
    return result(changed=True, failed=res.rc != 0 or res.timed_out, msg=msg, cmd=shown, rc=res.rc,
                  stdout=out, stderr=err, stdout_lines=out.splitlines(), stderr_lines=err.splitlines(),
                  timed_out=bool(res.timed_out), **extra)


class Command(Module):
    name = "command"
    free_form = True
    args = {**COMMON_ARGS, "argv": Arg(list)}

    def run(self, ctx: TaskContext, args: dict) -> dict:
        if args.get("argv") is not None:
            argv = [str(a) for a in args["argv"]]
        elif args.get("cmd"):
            try:
                argv = shlex.split(str(args["cmd"]))
            except ValueError as e:
                return result(failed=True, msg=f"cannot split the command line: {e}")
        else:
            argv = []
        if not argv:
            return result(failed=True, msg="no command given (cmd or argv)")
        line = " ".join(shlex.quote(a) for a in argv)
        return run_program(ctx, args, line, " ".join(shlex.quote(a) for a in argv))
