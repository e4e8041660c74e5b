"""loop_control's `index_var`, `extended` (`ansible_loop`) and `break_when`, as ansible-core's
task executor gives them to each item and records them in each item's result."""
from __future__ import annotations

from typing import Any


def loop_extras(control: dict, items: list, index: int, templar: Any, variables: dict) -> dict:
    """The variables (and result keys) one loop item adds beside its loop_var."""
    out: dict = {}
    if control.get("index_var"):
        out[control["index_var"]] = index
        out["ansible_index_var"] = control["index_var"]
    extended = control.get("extended")
    if templar.is_template(extended):
        extended = templar.render(extended, variables)
    if extended in (True, "true", "True", "yes", 1):
        n = len(items)
        loop: dict = {"index": index + 1, "index0": index, "revindex": n - index, "revindex0": n - index - 1,
                "first": index == 0, "last": index == n - 1, "length": n}
        if index > 0:
            loop["previtem"] = items[index - 1]
        if index < n - 1:
            loop["nextitem"] = items[index + 1]
        if control.get("extended_allitems", True) not in (False, "false", "no"):
            loop["allitems"] = items
        out["ansible_loop"] = loop
    return out


def registered(task: Any, res: dict) -> dict:
    """break_when sees the item's result under the task's register name."""
    return {task.register: res} if task.register else {}
