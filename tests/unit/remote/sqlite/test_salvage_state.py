"""Each part of a salvage's state is written by its own stage only (state.py's WRITERS), read
off the stages' code: an assignment, augmented assignment, item assignment, `del` or mutating
call (append, update, add, ...) on `s.<part>.<field>`; `s.<part>` itself and the arguments are
never assigned, and nothing but the report is written on the state outside its parts. What a
field holds is its own business (a TableState's rows, filled by the scan and the walk)."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

import fleetops.remote.sqlite.salvage as pkg
from fleetops.remote.sqlite.salvage.state import REPORT, WRITERS, SalvageArgs, SalvageState

MUTATORS = {"append", "extend", "update", "add", "setdefault", "pop", "popitem", "discard", "clear",
            "remove", "insert", "sort", "__setitem__"}


def _chain(node: ast.AST) -> list[str] | None:
    """`s.a.b[...]` -> ["a", "b"]; None when the expression is not rooted at the name `s`."""
    names: list[str] = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            names.insert(0, node.attr)
        node = node.value
    return names if isinstance(node, ast.Name) and node.id == "s" else None


def writes(source: str) -> list[tuple[int, list[str]]]:
    """(line, attribute chain under `s`) of every write through `s` in `source`."""
    out = []
    for node in ast.walk(ast.parse(source)):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
            targets = [node.func.value]
        for t in targets:
            for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                chain = _chain(e)
                if chain:
                    out.append((node.lineno, chain))
    return sorted(out)


def foreign_writes(module: str, source: str) -> list[str]:
    out = []
    for line, chain in writes(source):
        part = chain[0]
        if part in REPORT or len(chain) > 2:     # deeper: an object a field holds (a TableState)
            continue
        if part in WRITERS and len(chain) > 1 and module in WRITERS[part]:
            continue
        out.append(f"{module}:{line}: s.{'.'.join(chain)}")
    return out


def _stage_sources() -> dict[str, str]:
    root = Path(pkg.__file__).parent
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(root.glob("*.py")) if p.stem != "state"}


def test_each_part_is_written_by_its_own_stage_only():
    sources = _stage_sources()
    assert {"inputs", "schema", "scan", "walk", "write", "fts", "verify", "__init__"} <= set(sources)
    assert sum(len(writes(src)) for src in sources.values()) > 40      # the stages' writes were read
    found = [f for module, src in sources.items() for f in foreign_writes(module, src)]
    assert not found, "\n".join(found)


def test_the_state_is_its_parts_and_the_report():
    s = SalvageState("/tmp/src.db", "/tmp/out.db")
    assert set(vars(s)) == set(WRITERS) | set(REPORT) | {"tmpdir"}
    assert all(dataclasses.is_dataclass(getattr(s, part)) for part in WRITERS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.args.output = "/elsewhere"     # type: ignore[misc]
    assert isinstance(s.args, SalvageArgs) and s.args.quarantine_path == "/tmp/out.db.quarantine.jsonl"


def test_the_ownership_check_can_fail():
    src = ("def f(s):\n    s.scan.classes = {}\n    s.dest.fk_cache['t'] = 1\n    s.fts.jobs.append(1)\n"
           "    s.notes.append('x')\n    s.image = None\n    s.args.batch += 1\n    x = s.scan.classes\n"
           "    s.loose = 1\n    del s.fts.spec['t']\n    s.schema.states['t'].rows = []\n")
    assert foreign_writes("scan", src) == [
        "scan:3: s.dest.fk_cache", "scan:4: s.fts.jobs", "scan:6: s.image", "scan:7: s.args.batch",
        "scan:9: s.loose", "scan:10: s.fts.spec"]
    assert foreign_writes("write", "def f(s):\n    s.dest.out = 1\n    s.dest.fk_cache['t'] = 1\n") == []
