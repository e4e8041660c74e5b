"""include_tasks / include_role as ansible-core runs them: a loop over the include, or a file or
role name that is a template, is resolved per host when the include is reached.

What can be read before the run is: a loop over a named file reads that file once here (so its
tasks are checked before any host is contacted, the loop variable known to them); a templated
name is read when a host reaches it (a bad file then fails the hosts that include it, as in
Ansible), and the task files its template could name are read here only for the names they define
(`register`, set_fact), so later tasks that use them pass validation.
"""
from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import Any

from fleetops.engine.playbook.checks import is_template
from fleetops.engine.playbook.includes import find_task_file, read_task_file
from fleetops.engine.playbook.keywords import Inherit
from fleetops.errors import BadInput

_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)


@dataclass
class DynamicInclude:
    """What an include needs to be read at run time: its kind, raw names and the keywords its
    tasks inherit (the include's own `when` is its own, evaluated once per host and item)."""

    kind: str                                    # include_tasks or include_role
    name: str                                    # file or role name, maybe a template
    froms: dict = field(default_factory=dict)    # include_role's tasks_from, vars_from, ... (maybe templates)
    public: bool = False
    inherit: Any = None                          # Inherit for the included tasks
    handler: bool = False
    where: str | None = ""
    candidates: list = field(default_factory=list, repr=False)   # tasks a templated name could give

    @property
    def templated(self) -> bool:
        return is_template(self.name) or any(is_template(v) for v in self.froms.values())


def read_included(kind: str, name: str, froms: dict, inh: Inherit, handler: bool, where: str | None,
                  public: bool = False) -> list:
    """The tasks one include names, read with the includer's keywords."""
    if kind in ("include_tasks", "import_tasks"):
        return read_task_file(find_task_file(name, inh, where), inh, handler, where)
    from fleetops.engine.playbook.roles import load_role
    return load_role(name, inh, {}, where, froms, once=False, export=kind == "import_role" or public)


def read_at_run_time(dyn: DynamicInclude, name: str, froms: dict) -> list:
    """The tasks a host's rendered name gives (BadInput, with the file:line, when they are bad)."""
    name = name.strip() if isinstance(name, str) else name
    if not isinstance(name, str) or not name:
        raise BadInput(f"{dyn.kind} name rendered to {name!r}, not a name", where=dyn.where)
    return read_included(dyn.kind, name, froms, dyn.inherit, dyn.handler, dyn.where, dyn.public)


def candidate_tasks(dyn: DynamicInclude) -> list:
    """The tasks of every file a templated include_tasks name could give (each template part read
    as a glob), for the names they define; a file that does not read as tasks is left to run time.
    Each file is read so once per play: its names are the play's whichever include reads it, and
    candidates that include each other by a template ("{{ item }}" in every file of a directory)
    would otherwise be read along every path through them."""
    if dyn.kind != "include_tasks" or not is_template(dyn.name):
        return []
    pattern = os.path.expanduser(_TEMPLATE.sub("*", dyn.name.strip()))
    inh = dyn.inherit
    bases = [inh.base_dir] + ([os.path.join(inh.role_path, "tasks")] if inh.role_path else [])
    bases.append(inh.load.playbook_dir)
    out: list = []
    seen: set = set()
    for base in dict.fromkeys(bases):
        for path in sorted(glob.glob(os.path.join(base, pattern)))[:50]:
            path = os.path.normpath(path)
            if path in seen or path in inh.load.candidates_read or not os.path.isfile(path) \
                    or not path.endswith((".yml", ".yaml")):
                continue
            seen.add(path)
            if path in inh.files:
                continue                # the includer itself: read already, on this path
            inh.load.candidates_read.add(path)
            try:
                out += read_task_file(path, inh, dyn.handler, dyn.where)
            except BadInput as exc:
                if "includes itself" in exc.msg:        # this path's fault, not the file's: another may read it
                    inh.load.candidates_read.discard(path)
                continue
    return out
