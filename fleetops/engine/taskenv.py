"""The `environment` keyword: the variables a task's programs and payloads see on the host.

Parts come from the play, roles, blocks and the task (outer first); each is a mapping whose
values are rendered for the host, or a template of a mapping, and inner parts win key by key,
as in ansible-core. The values never travel on a command line (where `ps` would show them to
every user of the host): a payload gets them in its stdin document, a command line reads them
from the first line of its own stdin (`wrap_line`) before it runs, after become's sudo.
"""
from __future__ import annotations

import re
import shlex

from fleetops.engine.templating import Templar

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# sh reads one line of assignments from stdin and runs it; a newline in a value travels as
# "$fo_n" (set to a newline without a newline in the line, so any login shell can carry it)
READER = ("fo_n=$(printf '\\n_'); fo_n=${fo_n%_}; IFS= read -r fo_e || exit 125; eval \"$fo_e\" || exit 125; "
          "unset fo_e fo_n; ")


class EnvironmentError_(ValueError):
    """An `environment` part that does not give names and values; the task fails with it."""


def render_environment(parts: list, templar: Templar, variables: dict, omit: str | None = None) -> dict:
    """{NAME: text} for the task on this host; TemplateError for an undefined variable,
    EnvironmentError_ for a part that is not a mapping or a name a shell cannot export."""
    out: dict = {}
    for part in parts or ():
        if isinstance(part, dict):
            rendered = {}
            for k, v in part.items():
                value = templar.render(v, variables) if Templar.is_template(v) else v
                if omit is not None and value == omit:
                    continue
                rendered[k] = value
        else:
            rendered = templar.render(part, variables)
            if not isinstance(rendered, dict):
                raise EnvironmentError_(f"environment must be a dictionary, received {rendered!r} "
                                        f"({type(rendered).__name__})")
        for k, v in rendered.items():
            if not isinstance(k, str) or not NAME.match(k):
                raise EnvironmentError_(f"environment variable name {k!r} is not valid (letters, digits, "
                                        f"underscore; not starting with a digit)")
            text = str(v)
            if "\0" in text:
                raise EnvironmentError_(f"environment variable {k} holds a NUL character")
            out[k] = text
    return out


def _quoted(value: str) -> str:
    return '"$fo_n"'.join(shlex.quote(piece) for piece in value.split("\n"))


def wrap_line(line: str, env: dict, stdin: bytes | None) -> tuple[str, bytes | None]:
    """(line, stdin) that run `line` with `env` exported: the assignments are stdin's first
    line, read by the shell itself; the program reads the rest of stdin as before."""
    if not env:
        return line, stdin
    head = "".join(f"export {k}={_quoted(v)}; " for k, v in env.items()).encode() + b"\n"
    return READER + line, head + (stdin or b"")
