"""Each folder's import rule, checked on every .py under fleetops/ (imports inside functions too):

- fleetops/engine imports none of fleetops.modules, fleetops.hermes, or the thin layer
  (fleetops.cli, runner, display, report, extensions);
- fleetops/modules imports nothing of fleetops.hermes;
- fleetops/remote imports only the standard library and fleetops.remote (it runs on the host).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fleetops"
ENGINE_MAY_NOT = ("fleetops.modules", "fleetops.hermes", "fleetops.cli", "fleetops.runner", "fleetops.display",
                  "fleetops.report", "fleetops.extensions")


def imported(source: str, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in `source`, the source of `module`."""
    package = module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            # `from fleetops import hermes` names the package through the imported name
            out += [(node.lineno, f"{name}.{a.name}") for a in node.names if name == "fleetops"]
    return sorted(out)


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def violations(source: str, module: str) -> list[str]:
    """The folder-rule breaks of one file, as `module:line: imports name`."""
    out = []
    for line, name in imported(source, module):
        if _within(module, ("fleetops.engine",)):
            bad = _within(name, ENGINE_MAY_NOT)
        elif _within(module, ("fleetops.modules",)):
            bad = _within(name, ("fleetops.hermes",))
        elif _within(module, ("fleetops.remote",)):
            top = name.split(".")[0]
            bad = not (_within(name, ("fleetops.remote",)) or name == "fleetops"
                       or (top in sys.stdlib_module_names and top != "fleetops"))
        else:
            bad = False
        if bad:
            out.append(f"{module}:{line}: imports {name}")
    return out


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_every_folder_keeps_its_import_rule():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50, "the walk must see the whole package"
    found = []
    for path in files:
        found += violations(path.read_text(encoding="utf-8"), _module_name(path))
    assert not found, "\n".join(found)


def test_the_rule_check_can_fail():
    """Fed sources that break each rule (at top level and inside a function), it reports them."""
    engine = ("import os\nfrom fleetops.engine import module\n"
              "def f():\n    from fleetops.modules.registry import GENERIC\n"
              "def g():\n    import fleetops.hermes.audit\n"
              "from fleetops import runner\nfrom .. import cli\n")
    assert violations(engine, "fleetops.engine.executor") == [
        "fleetops.engine.executor:4: imports fleetops.modules.registry",
        "fleetops.engine.executor:6: imports fleetops.hermes.audit",
        "fleetops.engine.executor:7: imports fleetops.runner",
        "fleetops.engine.executor:8: imports fleetops.cli",
    ]
    assert violations("from fleetops.hermes import audit\n", "fleetops.modules.copy") == [
        "fleetops.modules.copy:1: imports fleetops.hermes"]
    remote = ("import json, sqlite3\nfrom fleetops.remote import durable\nfrom . import facts\n"
              "def main(args):\n    import yaml\n    from fleetops.engine import payload\n")
    assert violations(remote, "fleetops.remote.files") == [
        "fleetops.remote.files:5: imports yaml",
        "fleetops.remote.files:6: imports fleetops.engine",
    ]
    assert violations(remote, "fleetops.hermes.audit") == []    # hermes may import what it needs
