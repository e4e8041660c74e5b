"""`with_<lookup>` loops (with_list, with_dict, with_nested, with_sequence, ...): the task's loop
is the lookup's list, run with the rendered terms, as ansible-core's `loop_with` runs it."""
from __future__ import annotations

from fleetops.engine.templating.filters import LOOKUPS


class WithLoop(dict):
    """The loop of a `with_<name>: terms` task; a mapping so validation reads its terms' templates."""

    @property
    def lookup(self) -> str:
        return self["with"]

    @property
    def terms(self):
        return self["terms"]


def with_keys() -> tuple:
    """Every `with_<lookup>` key a task may carry (with_items is read as the loop it always was)."""
    return tuple(f"with_{name}" for name in LOOKUPS if name != "items" and "." not in name)


def with_key(m) -> str | None:
    keys = [k for k in m if isinstance(k, str) and k in with_keys()]
    return keys[0] if keys else None
