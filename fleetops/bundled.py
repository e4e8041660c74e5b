"""The playbooks that ship inside the package: found by name, listed, copied out.

They are package data (`fleetops/playbooks/`, with their `templates/` and `files/`), found
through `importlib.resources` so that what runs is what was installed, wherever the
package lives. A playbook's description and variables come from its own header comment:
the first comment line says what it does; `#   name: text` lines under `# Variables`
name what it takes.
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from importlib import resources

from fleetops.errors import BadInput


@dataclass
class Bundled:
    name: str
    path: str
    summary: str
    variables: list = field(default_factory=list)   # [(name, text)]


def directory() -> str:
    """The installed `playbooks/` folder (a real directory: the package is never zipped)."""
    return str(resources.files("fleetops") / "playbooks")


def _header(path: str) -> tuple:
    """(summary, [(var, text)]) from the playbook's leading comment block."""
    summary, variables, in_vars = "", [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("#"):
                break
            text = line[1:].rstrip()
            if not summary:
                summary = text.strip()
            elif re.match(r"\s*Variables\b", text):
                in_vars = True
            elif in_vars and re.match(r"\s{1,3}[A-Za-z_]\w*(\s|$)", text):
                name, *rest = re.split(r"\s{2,}", text.strip(), maxsplit=2)
                if len(rest) == 1 and " " in name:          # `name default` with one space between
                    name, _, first = name.partition(" ")
                    rest.insert(0, first)
                variables.append((name, " — ".join(r.strip() for r in rest)))
            elif in_vars and re.match(r"\s{4,}\S", text) and variables:
                variables[-1] = (variables[-1][0], f"{variables[-1][1]} {text.strip()}".strip())
            elif in_vars:
                in_vars = False
    return summary, variables


def playbooks() -> list:
    """Every bundled playbook, by name (file name without `.yml`), sorted."""
    base = directory()
    out = []
    for fn in sorted(os.listdir(base)):
        if fn.endswith(".yml"):
            path = os.path.join(base, fn)
            summary, variables = _header(path)
            out.append(Bundled(fn[:-4], path, summary, variables))
    return out


def path(name: str) -> str:
    """The installed file of bundled playbook `name` (`repair` or `repair.yml`)."""
    stem = name[:-4] if name.endswith(".yml") else name
    p = os.path.join(directory(), stem + ".yml")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", stem) or not os.path.isfile(p):
        names = ", ".join(b.name for b in playbooks())
        raise BadInput(f"no playbook file {name!r} and no bundled playbook of that name (bundled: {names})",
                       where=name)
    return p


def resolve(arg: str) -> str:
    """A user's file when `arg` names one, else the bundled playbook of that name."""
    if os.path.exists(arg) or os.sep in arg:
        return arg
    return path(arg)


def copy_out(name: str, dest: str) -> list:
    """Copy bundled playbook `name` with the templates and files it uses into `dest`.

    Never overwrites: an existing file at a target is refused before anything is written.
    Returns the paths written.
    """
    src = path(name)
    base = directory()
    if not os.path.isdir(dest):
        raise BadInput("destination is not a directory", where=dest)
    todo = [(src, os.path.join(dest, os.path.basename(src)))]
    for sub in ("templates", "files"):
        d = os.path.join(base, sub)
        if sub_used(src, d):
            for fn in sorted(os.listdir(d)):
                if os.path.isfile(os.path.join(d, fn)) and not fn.endswith(".pyc"):
                    todo.append((os.path.join(d, fn), os.path.join(dest, sub, fn)))
    clash = [t for _, t in todo if os.path.lexists(t)]
    if clash:
        raise BadInput("would overwrite an existing file; move it away or copy elsewhere", where=clash[0])
    for s, t in todo:
        os.makedirs(os.path.dirname(t), exist_ok=True)
        shutil.copyfile(s, t)               # follows the package's symlinks: the copy is a real file
        shutil.copymode(s, t)
    return [t for _, t in todo]


def sub_used(playbook: str, subdir: str) -> bool:
    """Whether `playbook` names any file of `subdir` (a template or file it copies)."""
    if not os.path.isdir(subdir):
        return False
    with open(playbook, encoding="utf-8") as f:
        text = f.read()
    return any(fn in text for fn in os.listdir(subdir) if os.path.isfile(os.path.join(subdir, fn)))
