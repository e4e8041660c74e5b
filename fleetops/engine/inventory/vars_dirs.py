"""group_vars/ and host_vars/ beside an inventory: found by name as ansible-core finds them
(a file with or without .yml/.yaml/.json, or a directory of them, read in sorted order)."""
from __future__ import annotations

import os
from typing import cast

from fleetops.engine import varsfile as _varsfile
from fleetops.engine.yamlsrc import Mapping, plain

VARS_EXTENSIONS = (".yml", ".yaml", ".json")


def find_vars_files(directory: str, name: str) -> list:
    """Ansible's lookup: the first of <name>, <name>.yml, .yaml, .json; a directory is read recursively."""
    base = os.path.join(directory, name)
    for ext in ("",) + VARS_EXTENSIONS:
        candidate = base + ext
        if os.path.isdir(candidate):
            return _dir_vars_files(candidate)
        if os.path.exists(candidate):
            return [candidate]
    return []


def _dir_vars_files(directory: str) -> list:
    found = []
    for entry in sorted(os.listdir(directory)):
        if entry.startswith(".") or entry.endswith("~"):
            continue
        full = os.path.join(directory, entry)
        ext = os.path.splitext(entry)[1]
        if os.path.isdir(full) and not ext:
            found.extend(_dir_vars_files(full))
        elif os.path.isfile(full) and (not ext or ext in VARS_EXTENSIONS):
            found.append(full)
    return found


def read_vars_file(path: str):
    """One group_vars/host_vars file -> (plain vars, where-by-key); names are not checked."""
    data = _varsfile.load_vars_file(path, check_names=False)
    return plain(data), {k: cast(Mapping, data).key_where(k) for k in data}


def load_vars_dirs(inv, base: str) -> None:
    for kind, items in (("group_vars", inv.groups), ("host_vars", inv.hosts)):
        directory = os.path.join(base, kind)
        if not os.path.isdir(directory):
            continue
        for name, obj in items.items():
            for f in find_vars_files(directory, name):
                data, wheres = read_vars_file(f)
                obj.file_vars.update(data)
                obj.file_where.update(wheres)
