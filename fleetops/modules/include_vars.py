"""`include_vars`: variables from a YAML/JSON file (or every file of a directory) for the rest of
the run on this host, found where ansible-core looks: the role's vars/, the role, the playbook's
vars/, the playbook's directory. Values stay templates, rendered where they are used, as
vars_files' are; `name:` puts them under one variable."""
from __future__ import annotations

import glob
import os
import re

from fleetops.engine.varsfile import load_vars_file
from fleetops.errors import BadInput
from fleetops.engine.module import Arg, Module, TaskContext, result

EXTENSIONS = ("yaml", "yml", "json")
_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}")


def search_dirs(task, base_dir: str) -> list:
    role = getattr(task, "role_path", None)
    dirs = [os.path.join(role, "vars"), role] if role else []
    return dirs + [os.path.join(base_dir, "vars"), base_dir]


def find(name: str, task, base_dir: str) -> str | None:
    name = os.path.expanduser(name)
    if os.path.isabs(name):
        return name if os.path.exists(name) else None
    for d in search_dirs(task, base_dir):
        cand = os.path.join(d, name)
        if os.path.exists(cand):
            return cand
    return None


def dir_files(path: str, extensions) -> list:
    out = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        out += [os.path.join(root, f) for f in sorted(files)
                if not f.startswith(".") and f.rsplit(".", 1)[-1] in extensions]
    return out


class IncludeVars(Module):
    name = "include_vars"
    runs_on_controller = True
    free_form = True
    args = {"file": Arg(str), "dir": Arg(str), "name": Arg(str), "extensions": Arg(list)}

    @staticmethod
    def check_static(args: dict, where: str) -> None:
        given = [k for k in ("cmd", "file", "dir") if args.get(k) is not None]
        if len(given) != 1:
            raise BadInput("include_vars needs one of a file name, 'file' or 'dir'", where=where)

    @staticmethod
    def defines(task, base_dir: str) -> set:
        """The names the files it may read define (a templated file name: every file it could
        name, its templates read as globs), for validation before the run."""
        args = task.args or {}
        if args.get("name"):
            return {args["name"]} if isinstance(args["name"], str) else set()
        raw = args.get("cmd") or args.get("file") or args.get("dir")
        if not isinstance(raw, str):
            return set()
        names: set = set()
        pattern = _TEMPLATE.sub("*", os.path.expanduser(raw))
        dirs = [""] if os.path.isabs(pattern) else search_dirs(task, base_dir)
        for d in dirs:
            for hit in glob.glob(os.path.join(d, pattern)):
                files = dir_files(hit, EXTENSIONS) if os.path.isdir(hit) else [hit]
                for f in files:
                    try:
                        names |= {k for k in load_vars_file(f) if isinstance(k, str)}
                    except BadInput:
                        continue
        return names

    def run(self, ctx: TaskContext, args: dict) -> dict:
        task = ctx.task
        raw = args.get("cmd") or args.get("file") or args.get("dir")
        path = find(str(raw), task, ctx.project_dir or os.getcwd())
        if path is None:
            return result(failed=True, msg=f"Could not find or access '{raw}' (looked in "
                                           f"{', '.join(search_dirs(task, ctx.project_dir or '.'))})")
        if args.get("dir") is not None:
            if not os.path.isdir(path):
                return result(failed=True, msg=f"{path} is not a directory")
            files = dir_files(path, tuple(args.get("extensions") or EXTENSIONS))
        elif os.path.isdir(path):
            return result(failed=True, msg=f"{path} is a directory: use 'dir'")
        else:
            files = [path]
        data: dict = {}
        for f in files:
            try:
                data.update(load_vars_file(f))
            except BadInput as exc:
                return result(failed=True, msg=f"{exc.where or f}: {exc.msg}")
        if args.get("name"):
            data = {str(args["name"]): data}
        return result(ansible_included_vars=data, ansible_included_var_files=files)
