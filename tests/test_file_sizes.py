"""scripts/file_sizes.py: the size rule reads its allow-list, with a reason per entry, from
pyproject.toml, and fails on a long file it does not allow and on an entry gone stale."""
from __future__ import annotations

import importlib.util

from tests.support.paths import REPO


def _rule():
    spec = importlib.util.spec_from_file_location("file_sizes", REPO / "scripts" / "file_sizes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tree(tmp_path, allow: str, lines: int):
    (tmp_path / "fleetops").mkdir()
    (tmp_path / "fleetops" / "long.py").write_text("x = 1\n" * lines)
    (tmp_path / "pyproject.toml").write_text(
        "[tool.fleetops.file_sizes]\nlimit = 600\n[tool.fleetops.file_sizes.allow]\n" + allow)


def test_the_checkout_passes_and_every_entry_has_a_reason():
    rule = _rule()
    assert rule.offenders() == []
    limit, allow = rule.settings()
    assert limit == 600 and allow and all(len(why) > 20 for why in allow.values())


def test_a_long_file_not_allowed_fails(tmp_path):
    _tree(tmp_path, "", 601)
    assert [b.split(" has ")[0] for b in _rule().offenders(tmp_path)] == ["file_sizes: fleetops/long.py"]


def test_an_allowed_long_file_passes_and_a_stale_or_bare_entry_fails(tmp_path):
    _tree(tmp_path, '"fleetops/long.py" = "one file on the host"\n', 601)
    assert _rule().offenders(tmp_path) == []
    (tmp_path / "fleetops" / "long.py").write_text("x = 1\n")
    assert "drop the entry" in _rule().offenders(tmp_path)[0]
    (tmp_path / "pyproject.toml").write_text((tmp_path / "pyproject.toml").read_text().replace(
        '"one file on the host"', '""'))
    assert "without a reason" in _rule().offenders(tmp_path)[0]
