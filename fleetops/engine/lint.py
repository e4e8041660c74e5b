"""Checks of a loaded playbook that look at what a module's arguments mean, not only their
shape: a module may refuse an argument before any host is contacted (`check_static`), and
`shell:` commands that splice a variable in unquoted are warned about.

Kept apart from validate.py, which checks names and templates against the inventory.
"""
from __future__ import annotations

import re

from fleetops.engine.playbook import walk_tasks
from fleetops.engine.templating import Templar

_QUOTED = re.compile(r"\|\s*quote\s*$")


def check_playbook(playbook, modules: dict) -> list:
    """Raise BadInput for an argument a module refuses; return warning lines ("where: text")."""
    warnings = []
    templar = None
    for play in playbook.plays:
        for task in walk_tasks(list(play.tasks) + list(play.handlers)):
            mod_cls = modules.get(task.module) if task.module else None
            if mod_cls is None:
                continue
            mod_cls.check_static(task.args or {}, task.key_where(task.module))
            if mod_cls.name == "shell":
                templar = templar or Templar()
                warnings += unquoted_in_shell(templar, task)
    return warnings


def unquoted_in_shell(templar, task) -> list:
    """A `{{ expr }}` naming a variable in a shell command line, without `| quote` last: the value
    reaches /bin/sh as shell code, not data (Ansible's semantics, which fleetops keeps)."""
    cmd = (task.args or {}).get("cmd")
    if not isinstance(cmd, str) or "{{" not in cmd:
        return []
    out = []
    try:
        tokens = list(templar.env.lex(cmd))
    except Exception:  # noqa: BLE001 - validation reports syntax errors itself
        return []
    inside, names = False, False
    src: list = []
    for _, kind, val in tokens:
        if kind == "variable_begin":
            inside, src, names = True, [], False
        elif kind == "variable_end" and inside:
            inside = False
            expr = "".join(src).strip()
            if names and not _QUOTED.search(expr):
                out.append(f"{task.key_where(task.module)}: shell: '{{{{ {expr} }}}}' is spliced into the command "
                           "line unquoted, so its value runs as shell code; add '| quote' (or use command:)")
        elif inside:
            src.append(val)
            names = names or kind == "name"
    return out
