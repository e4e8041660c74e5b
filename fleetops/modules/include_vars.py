"""`include_vars`: variables from a YAML/JSON file (or every file of a directory) for the rest of
the run on this host, found where ansible-core looks: the role's vars/, the role, the playbook's
vars/, the playbook's directory. Values stay templates, rendered where they are used, as
vars_files' are; `name:` puts them under one variable."""
from __future__ import annotations

import glob
import os
import re

from fleetops.engine.templating.filters import merge
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


def dir_files(path: str, extensions, depth: int = 0, matching: str | None = None, ignore=(),
              unknown_ok: bool = True, skip: str | None = None) -> list:
    """A directory's vars files as ansible-core's include_vars walks it: folders in order, each
    folder's files sorted, at most `depth` levels (0: all), names matching `files_matching` and
    none of `ignore_files` (regular expressions, anchored at the end); a file of another
    extension is passed over, or with `ignore_unknown_extensions` false an error (ValueError)."""
    out = []
    walked = sorted(os.walk(path, followlinks=True), key=lambda w: w[0])
    for root, _, files in walked:
        level = 1 if root == path else len(os.path.relpath(root, path).split(os.sep)) + 1   # the folder itself is 1
        if depth and level > depth:
            continue
        for f in sorted(files):
            full = os.path.join(root, f)
            if full == skip or (matching and not re.search(matching, f)):
                continue
            if any(re.search(rf"{rx}$", f) for rx in ignore):
                continue
            if f.rsplit(".", 1)[-1] not in extensions or "." not in f:
                if unknown_ok:
                    continue
                raise ValueError(f"{full} does not have a valid extension: {', '.join(extensions)}")
            out.append(full)
    return out


class IncludeVars(Module):
    name = "include_vars"
    runs_on_controller = True
    free_form = True
    args = {"file": Arg(str), "dir": Arg(str), "name": Arg(str), "extensions": Arg(list),
            "depth": Arg(int, default=0), "files_matching": Arg(str), "ignore_files": Arg((list, str)),
            "ignore_unknown_extensions": Arg(bool, default=False),
            "hash_behaviour": Arg(str, choices=("replace", "merge"))}

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
            ignore = args.get("ignore_files") or []
            role = getattr(task, "role_path", None)
            try:
                files = dir_files(path, tuple(args.get("extensions") or EXTENSIONS), int(args.get("depth") or 0),
                                  args.get("files_matching"), [ignore] if isinstance(ignore, str) else list(ignore),
                                  bool(args.get("ignore_unknown_extensions")),
                                  os.path.join(role, "vars", "main.yml") if role else None)
            except (ValueError, re.error) as exc:
                return result(failed=True, msg=str(exc), message=str(exc))
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
        if args.get("hash_behaviour") == "merge":
            old = ctx.variables
            data = {k: merge(old[k], v, recursive=True) if isinstance(old.get(k), dict) and isinstance(v, dict) else v
                    for k, v in data.items()}
        return result(ansible_included_vars=data, ansible_included_var_files=files)
