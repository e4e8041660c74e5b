"""The names a set_fact with a templated key (`set_fact: "{{ item }}=moo"` over a loop) defines,
found before the run by rendering the key for each item of a loop written in the playbook."""
from __future__ import annotations

from typing import Any

from fleetops.engine.playbook.withloop import WithLoop
from fleetops.engine.templating import Templar, TemplateError
from fleetops.engine.templating.lookups import LookupEnv, invoke, listify_terms

# lookups whose items depend only on their written terms
_PURE = ("list", "items", "nested", "together", "indexed_items", "dict", "sequence", "subelements")


def _has_template(templar: Templar, value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_has_template(templar, v) for v in value)
    if isinstance(value, dict):
        return any(_has_template(templar, v) for v in value.values())
    return templar.is_template(value)


def _items(task: Any, templar: Templar) -> list | None:
    loop = task.loop
    try:
        if isinstance(loop, WithLoop):
            if loop.lookup not in _PURE or _has_template(templar, loop.terms):
                return None
            return invoke(loop.lookup, listify_terms(loop.terms), LookupEnv(variables={}), {}, query=True)
        if isinstance(loop, list) and not _has_template(templar, loop):
            if task.own.get("loop_with") == "items":
                return [y for x in loop for y in (x if isinstance(x, list) else [x])]
            return loop
    except TemplateError:
        return None
    return None


def templated_names(task: Any, key: str) -> set:
    """Every name `key` renders to over the task's literal loop items (none when it cannot tell)."""
    templar = Templar()
    items = _items(task, templar) if task.loop is not None else [None]
    out = set()
    for item in items or ():
        try:
            name = templar.render(key, {task.loop_var or "item": item})
        except TemplateError:
            continue
        if isinstance(name, str):
            out.add(str(name))
    return out
