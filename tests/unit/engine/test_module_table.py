"""ModuleTable: a name the table has not is asked of its resolver once; a native module's
`ansible.builtin.`/short name is never asked (the native stays the default); iteration lists the
native modules only; with_modules keeps the resolver."""
from __future__ import annotations

from fleetops.engine.module import Module, ModuleTable, with_modules
from fleetops.engine.playbook.args import resolve_module


class Native(Module):
    name = "copy"


class Other(Module):
    name = "gather_facts"


def test_the_resolver_answers_unknown_names_only():
    asked = []

    def resolve(name):
        asked.append(name)
        return type("Bridged", (Module,), {"name": name}) if name.endswith("replace") else None

    table = ModuleTable({"copy": Native}, resolve)
    assert resolve_module("ansible.builtin.copy", table) == "copy" and table["copy"] is Native
    assert resolve_module("replace", table) == "replace" and table["replace"].name == "replace"
    assert "nosuch" not in table and table.get("nosuch") is None
    assert "replace" in table and table.get("ansible.legacy.copy") is None
    assert asked == ["replace", "nosuch"]
    assert list(table) == ["copy"]
    wider = with_modules(table, (Other,))
    assert isinstance(wider, ModuleTable) and sorted(wider) == ["copy", "gather_facts"] and "replace" in wider
    assert with_modules({"copy": Native}, (Other,)) == {"copy": Native, "gather_facts": Other}


def test_without_a_resolver_it_is_a_dict():
    table = ModuleTable({"copy": Native})
    assert "replace" not in table and table.get("replace", 1) == 1 and dict(table) == {"copy": Native}
