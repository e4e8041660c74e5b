"""Checks of one keyword's value (types, names), each failure a
BadInput at the exact file:line:column of the value."""
from __future__ import annotations

import difflib

from fleetops.engine.varsfile import VAR_NAME as IDENT, check_var_names
from fleetops.engine.yamlsrc import Mapping, Sequence
from fleetops.errors import BadInput

def kind(value) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an int"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def close(word, options) -> str:
    if not isinstance(word, str):
        return ""
    found = difflib.get_close_matches(word, list(options), n=3, cutoff=0.6)
    return f" (did you mean: {', '.join(found)}?)" if found else ""


def is_template(value) -> bool:
    return isinstance(value, str) and any(m in value for m in ("{{", "{%", "{#"))


def want_bool(m: Mapping, key, default=None):
    if key not in m or m[key] is None:
        return default
    v = m[key]
    if not isinstance(v, bool):
        raise BadInput(f"'{key}' must be true or false, not {kind(v)}", where=m.value_where(key))
    return v


def want_str(m: Mapping, key, default=None, allow_empty=False):
    if key not in m or m[key] is None:
        return default
    v = m[key]
    if not isinstance(v, str) or (not allow_empty and not v.strip()):
        raise BadInput(f"'{key}' must be a non-empty string, not {kind(v)}", where=m.value_where(key))
    return v


def want_name(m: Mapping, key, what="variable name"):
    v = want_str(m, key)
    if v is not None and not IDENT.match(v):
        raise BadInput(f"'{key}' must be a valid {what} (letters, digits, _), not {v!r}",
                       where=m.value_where(key))
    return v


def want_bool_or_template(m: Mapping, key, default=None):
    """true/false, or a template rendered for each host when the task runs (no_log)."""
    if key in m and is_template(m[key]):
        return m[key]
    return want_bool(m, key, default)


def want_int_or_template(m: Mapping, key, default=None, minimum=0):
    if key not in m or m[key] is None:
        return default
    v = m[key]
    if is_template(v):
        return v
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadInput(f"'{key}' must be an integer, not {kind(v)}", where=m.value_where(key))
    if v < minimum:
        raise BadInput(f"'{key}' must be at least {minimum}, not {v}", where=m.value_where(key))
    return v


def want_str_list(m: Mapping, key, split_commas=False) -> list:
    """A string or a list of strings (`tags: a` -> ['a'])."""
    if key not in m or m[key] is None:
        return []
    v = m[key]
    if isinstance(v, str):
        items = [s.strip() for s in v.split(",")] if split_commas else [v]
        return [s for s in items if s]
    if isinstance(v, list):
        for i, item in enumerate(v):
            if not isinstance(item, str) or not item.strip():
                where = v.item_where(i) if isinstance(v, Sequence) else m.value_where(key)
                raise BadInput(f"'{key}' items must be non-empty strings, not {kind(item)}", where=where)
        return list(v)
    raise BadInput(f"'{key}' must be a string or a list of strings, not {kind(v)}",
                   where=m.value_where(key))


def want_conditions(m: Mapping, key) -> list | None:
    """when/until/failed_when/changed_when: a string, a bool, or a list of them."""
    if key not in m or m[key] is None:
        return None
    v = m[key]
    items = v if isinstance(v, list) else [v]
    for i, item in enumerate(items):
        if not isinstance(item, (str, bool)) or (isinstance(item, str) and not item.strip()):
            where = v.item_where(i) if isinstance(v, Sequence) else m.value_where(key)
            raise BadInput(f"'{key}' must be an expression, a bool or a list of them, not {kind(item)}",
                           where=where)
    return list(items)


def want_vars(m: Mapping, key) -> dict:
    if key not in m or m[key] is None:
        return {}
    v = m[key]
    if not isinstance(v, dict):
        raise BadInput(f"'{key}' must be a mapping of variable names to values, not {kind(v)}",
                       where=m.value_where(key))
    check_var_names(v)
    return v


ENV_NAME_HINT = "a mapping of environment variable names to values, a template of one, or a list of those"


def want_environment(m: Mapping, key: str = "environment") -> list:
    """The `environment` keyword as a list of its parts (mappings or templates of one), outer
    parts first at run time: what taskenv.render_environment merges. A plain string, a number or
    a mapping with a key that is not a string is refused at its line."""
    if key not in m or m[key] is None:
        return []
    raw = m[key]
    items = list(raw) if isinstance(raw, list) else [raw]
    for i, item in enumerate(items):
        where = raw.item_where(i) if isinstance(raw, Sequence) else m.value_where(key)
        if isinstance(item, dict):
            for k in item:
                if not isinstance(k, str) or not k:
                    raise BadInput(f"'{key}' names must be strings, not {kind(k)}", where=where)
        elif item is not None and not is_template(item):
            raise BadInput(f"'{key}' must be {ENV_NAME_HINT}, not {kind(item)}", where=where)
    return [item for item in items if item]

