"""The tests' own layout rule: a product file's unit tests are found from its path.

`tests/unit/<dir>/test_<name>.py` and `test_<name>_<aspect>.py` test `fleetops/<dir>/<name>`
(a module, a package, or a data file such as a playbook); `tests/lab/` holds the tests that need
the sshd lab, `tests/scenario/` whole-tool runs without one, `tests/support/` the fixtures and
doubles. A unit or scenario test never asks for the lab.
"""
from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO, TESTS

PRODUCT = REPO / "fleetops"
LAB_FIXTURES = {"lab", "mixed_lab", "lab_clean", "fleet"}


def product_names(directory: Path) -> set[str]:
    """What a test file in the mirror of `directory` may be named after."""
    if not directory.is_dir():
        return set()
    out = set()
    for p in directory.iterdir():
        if p.name.startswith(("_", ".")):
            continue
        out.add((p.stem if p.is_file() else p.name).replace("-", "_"))
    return out


def unmirrored(unit_root: Path, product_root: Path) -> list[str]:
    """Unit test files whose path names no product file."""
    bad = []
    for test in sorted(unit_root.rglob("test_*.py")):
        rel = test.parent.relative_to(unit_root)
        names = product_names(product_root / rel)
        stem = test.stem[len("test_"):]
        if not any(stem == n or stem.startswith(n + "_") for n in names):
            bad.append(str(test.relative_to(unit_root.parent.parent)))
    return bad


def lab_users(root: Path) -> list[str]:
    """Test functions under `root` that ask for a lab fixture."""
    bad = []
    for f in sorted(root.rglob("test_*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                used = {a.arg for a in node.args.args} & LAB_FIXTURES
                if used:
                    bad.append(f"{f.relative_to(root.parent.parent)}::{node.name} uses {sorted(used)}")
    return bad


def test_every_unit_test_names_its_product_file():
    assert unmirrored(TESTS / "unit", PRODUCT) == []


def test_unit_and_scenario_tests_never_ask_for_the_lab():
    assert lab_users(TESTS / "unit") + lab_users(TESTS / "scenario") == []


def test_the_rule_fails_on_a_misplaced_test(tmp_path):
    (tmp_path / "fleetops" / "engine").mkdir(parents=True)
    (tmp_path / "fleetops" / "engine" / "inventory.py").write_text("")
    unit = tmp_path / "tests" / "unit" / "engine"
    unit.mkdir(parents=True)
    for name in ("test_inventory.py", "test_inventory_ini.py", "test_nowhere.py"):
        (unit / name).write_text("")
    assert unmirrored(tmp_path / "tests" / "unit", tmp_path / "fleetops") == ["tests/unit/engine/test_nowhere.py"]
    (tmp_path / "tests" / "unit" / "test_x.py").write_text("def test_a(lab):\n    pass\n")
    assert len(lab_users(tmp_path / "tests" / "unit")) == 1
