"""Text that is data, never a template: rendered output, host output, gathered facts.

Anything a host sends back is marked so, and never rendered again, so a host cannot smuggle a
template into the next task.
"""
from __future__ import annotations

from typing import Any

import yaml


class UnsafeText(str):
    """Text that is data, never a template (rendered output, host output, facts)."""

    __slots__ = ()

    def __reduce__(self):
        return UnsafeText, (str(self),)


def mark_unsafe(value: Any) -> Any:
    """Return `value` with every string turned into UnsafeText (containers are copied)."""
    if isinstance(value, UnsafeText):
        return value
    if isinstance(value, str):
        return UnsafeText(value)
    if isinstance(value, dict):
        return {k: mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mark_unsafe(v) for v in value]
    return value


# Let yaml.safe_dump (and the to_yaml filter) write UnsafeText like any str.
yaml.SafeDumper.add_representer(UnsafeText, yaml.SafeDumper.represent_str)
if hasattr(yaml, "CSafeDumper"):
    yaml.CSafeDumper.add_representer(UnsafeText, yaml.CSafeDumper.represent_str)
