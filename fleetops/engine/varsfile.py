"""Vars files: a mapping of variable names to values, in YAML (or JSON, when named `.json`).

group_vars/ and host_vars/ files, a play's `vars_files`, a role's defaults/ and vars/ and
`-e @file` are the same kind of file; one loader gives them one set of rules, positions for
every key, and one set of error lines.
"""
from __future__ import annotations

import json
import re

from fleetops.engine.yamlsrc import Mapping, load_yaml, read_text, yaml_kind
from fleetops.errors import BadInput

VAR_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def check_var_names(mapping: dict) -> None:
    """Every variable name must be usable in a template."""
    for k in mapping:
        if not isinstance(k, str) or not VAR_NAME.match(k):
            where = mapping.key_where(k) if isinstance(mapping, Mapping) else None
            raise BadInput(f"invalid variable name {k!r} (letters, digits and _ only)", where=where)


def _load_json(path: str):
    """A JSON vars file: duplicate keys refused (JSON itself allows them); positions are the file."""
    text = read_text(path)
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        return None

    def no_dups(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise BadInput(f"duplicate key '{k}'", where=path)
            out[k] = v
        return out
    try:
        data = json.loads(text, object_pairs_hook=no_dups)
    except json.JSONDecodeError as e:
        raise BadInput(f"JSON syntax error: {e.msg}", where=f"{path}:{e.lineno}:{e.colno}") from None
    if isinstance(data, dict):
        data = Mapping(data)
        data.where = path
    return data


def load_vars_file(path: str, what: str = "a vars file", check_names: bool = True) -> dict:
    """The file's variables with positions (an empty file gives none). Anything but a mapping is
    BadInput naming `what`; `check_names` refuses names a template cannot use (the inventory
    does not check its variables' names)."""
    path = str(path)
    data = _load_json(path) if path.endswith(".json") else load_yaml(path)
    if data is None:
        data = Mapping()
        data.where = path
        return data
    if not isinstance(data, dict):
        raise BadInput(f"{what} must be a mapping of variable names to values, got {yaml_kind(data)}",
                       where=getattr(data, "where", None) or path)
    if check_names:
        check_var_names(data)
    return data
