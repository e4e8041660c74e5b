"""`command`: run a program on the host without a shell.

As ansible-core's `command` (expand_argument_vars, on by default), each argument has a
leading `~` / `~user` and `$VAR` / `${VAR}` of the host's environment expanded the way
Python's os.path.expanduser(os.path.expandvars()) does there: an unset variable stays as
written, and nothing else is interpreted (`;`, `*`, quotes, spaces in a value reach the
program literally). `chdir`, `creates` and `removes` are paths expanded the same way;
`creates`/`removes` are glob patterns. `shell` shares the option handling below.
"""
from __future__ import annotations

import re
import shlex

from fleetops.engine.module import Arg, Module, TaskContext, result
from fleetops.engine.connection.become import become_failure, become_wrap
from fleetops.engine.taskenv import wrap_line
from fleetops.engine.connection.output import MAX_COMMAND_OUTPUT, size_text


_VAR_RE = re.compile(r"\$(\w+|\{[^}]*\})", re.ASCII)
_NAME_RE = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
_TILDE_USER_RE = re.compile(r"\A~[A-Za-z0-9._][A-Za-z0-9._-]*(?=/|\Z)")


def _literal(text: str, glob: bool) -> str:
    """Quote text for sh; with glob, leave * ? [ ] unquoted so the host's shell globs them."""
    if not glob:
        return shlex.quote(text) if text else ""
    return "".join(part if part in ("*", "?", "[", "]") else shlex.quote(part)
                   for part in re.split(r"([*?\[\]])", text) if part)


def host_word(text: str, expand: bool = True, glob: bool = False) -> str:
    """One sh word giving `text` on the host, with ~ and $VAR expanded as Python's
    expanduser(expandvars()) would there (an unset variable is kept as written)."""
    text = str(text)
    if not expand:
        return _literal(text, glob) or "''"
    out = []
    if text == "~" or text.startswith("~/"):
        out.append('"$HOME"')
        text = text[1:]
    else:
        m = _TILDE_USER_RE.match(text)
        if m:                      # sh expands ~user itself and keeps it when there is no such user
            out.append(m.group(0))
            text = text[m.end():]
    pos = 0
    for m in _VAR_RE.finditer(text):
        out.append(_literal(text[pos:m.start()], glob))
        name = m.group(1)[1:-1] if m.group(1).startswith("{") else m.group(1)
        if _NAME_RE.match(name):
            kept = m.group(0).replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")
            out.append(f'"${{{name}-{kept}}}"')
        else:
            out.append(_literal(m.group(0), glob))
        pos = m.end()
    out.append(_literal(text[pos:], glob))
    return "".join(out) or "''"


def quote_path(path: str) -> str:
    """A host path as one sh word, ~ and $VAR expanded (ansible-core's `path` arguments)."""
    return host_word(path)


def run_line(ctx: TaskContext, line: str, stdin: bytes | None = None, timeout: float | None = None,
             max_output: int | None = None, main: bool = False, shown: str = ""):
    """Run an already-quoted command line on the task's transport, through sudo when become is on;
    the program itself (`main`) as a background job when the task has `async:`."""
    line, stdin = wrap_line(line, ctx.environment, stdin)
    if ctx.become_user:
        line = become_wrap(line, ctx.become_user)
    if main and ctx.async_job is not None:
        return ctx.async_job.run(line, stdin, shown)
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
    "expand_argument_vars": Arg(bool, default=True),
}


def run_program(ctx: TaskContext, args: dict, line: str, shown: str) -> dict:
    """creates/removes, check mode, chdir, stdin: the same for command and shell."""
    for key, want_exists in (("creates", False), ("removes", True)):
        path = args.get(key)
        if path:
            # glob.glob(path) after chdir, as ansible-core: any match (a dangling symlink too)
            # the path as the host expands it (~, $VARS) first: ansible-core's messages name that
            probe_line = (f"printf '%s\\n' {host_word(path)}; "
                          f'( for f in {host_word(path, glob=True)}; do {{ test -e "$f" || test -L "$f"; }} '
                          f'&& exit 0; done; exit 1 )')
            if args.get("chdir"):
                probe_line = f"cd {quote_path(args['chdir'])} && {probe_line}"
            probe = run_line(ctx, probe_line)
            exists = probe.rc == 0
            path = _text(probe.stdout) or path
            if exists != want_exists:
                why = f"{path} exists" if exists else f"{path} does not exist"
                return result(msg=f"Did not run command since '{path}' {'exists' if exists else 'does not exist'}",
                              cmd=shown, rc=0, stdout=f"skipped, since {why}", stderr="",
                              stdout_lines=[f"skipped, since {why}"], stderr_lines=[])
    if ctx.check:
        # as ansible-core: skipped, unless creates/removes were given (then it "would have run": changed)
        decided = bool(args.get("creates") or args.get("removes"))
        return result(skipped=not decided, changed=decided, msg="Command would have run if not in check mode",
                      cmd=shown, rc=0)
    if args.get("chdir"):
        line = f"cd {quote_path(args['chdir'])} && {line}"
    stdin = None
    if args.get("stdin") is not None:
        text = str(args["stdin"])
        if args.get("stdin_add_newline", True) and not text.endswith("\n"):
            text += "\n"
        stdin = text.encode()
    res = run_line(ctx, line, stdin=stdin, timeout=args.get("timeout"), max_output=MAX_COMMAND_OUTPUT, main=True,
                   shown=shown)
    return program_result(ctx.become_user, shown, res)


def program_result(become_user: str | None, shown: str, res) -> dict:
    """command's and shell's result from the program's CommandResult (foreground or a finished job)."""
    out, err = _text(res.stdout), _text(res.stderr)
    why = become_failure(become_user, res.rc, res.stderr)
    if res.timed_out:
        msg = f"timed out: {shown}"
    elif why:
        msg = why
    elif res.rc != 0:
        msg = f"non-zero return code {res.rc}"
    else:
        msg = ""
    extra = {}
    dropped = {name: n for name, n in (("stdout", res.stdout_dropped), ("stderr", res.stderr_dropped)) if n}
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
    args = {**COMMON_ARGS, "argv": Arg(list), "executable": Arg(str)}   # executable: accepted, ignored, warned

    def run(self, ctx: TaskContext, args: dict) -> dict:
        res = self._run(ctx, args)
        if args.get("executable"):     # ansible-core's own words: command never used a shell
            res.setdefault("warnings", []).append(
                "As of Ansible 2.4, the parameter 'executable' is no longer supported with the 'command' module. "
                f"Not using '{args['executable']}'.")
        return res

    def _run(self, ctx: TaskContext, args: dict) -> dict:
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
            return result(failed=True, msg="one of the following is required: _raw_params, cmd, argv")
        expand = args.get("expand_argument_vars", True) is not False
        line = " ".join(host_word(a, expand=expand) for a in argv)
        return run_program(ctx, args, line, " ".join(shlex.quote(a) for a in argv))
