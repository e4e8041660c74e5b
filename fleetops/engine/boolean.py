"""The controller's one boolean rule: ansible-core's word set (module_utils/parsing/convert_bool.py).

Every on/off value the engine reads (a module argument, a connection variable, an ansible.cfg
setting, a `k=v` argument, a rendered play keyword) is read here, so `t`, `Y` and `off` mean
the same wherever they are written. Two readers keep ansible-core's own difference: a
condition (`truthy`: any other word is true, as Jinja sees a non-empty string) and the `bool`
filter (templating/filters.py: ansible-core's `to_bool`, its own word set).
"""
from __future__ import annotations

from typing import Any

TRUE_WORDS = frozenset({"y", "yes", "on", "1", "true", "t"})
FALSE_WORDS = frozenset({"n", "no", "off", "0", "false", "f"})
EMPTY_WORDS = frozenset({"", "none"})      # a condition that rendered to nothing is false


def parse_bool(value: Any) -> bool | None:
    """True or False for a bool, 0/1, or a word of either set (any case, spaces stripped); else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value) if value in (0, 1) else None
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
    return None


def boolean(value: Any, strict: bool = True) -> bool:
    """`parse_bool`, with anything else a ValueError (strict) or False, as ansible-core's `boolean`."""
    parsed = parse_bool(value)
    if parsed is None:
        if strict:
            raise ValueError(f"{value!r} is not a boolean (true: {', '.join(sorted(TRUE_WORDS))}; "
                             f"false: {', '.join(sorted(FALSE_WORDS))})")
        return False
    return parsed


def truthy(value: Any) -> bool:
    """A condition's truth: a boolean word as `parse_bool` reads it, nothing ("", "none") false,
    any other string true; a value that is not a string by Python's truth."""
    if isinstance(value, str):
        word = value.strip().lower()
        return word not in FALSE_WORDS and word not in EMPTY_WORDS
    return bool(value)
