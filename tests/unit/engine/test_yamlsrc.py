"""YAML with positions: every later error message depends on these being exact."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from fleetops.engine.yamlsrc import Mapping, Sequence, load_yaml, load_yaml_text
from fleetops.errors import BadInput


def bad(text: str, name: str = "f.yml") -> BadInput:
    with pytest.raises(BadInput) as info:
        load_yaml_text(text, name)
    assert "\n" not in str(info.value)
    return info.value


def test_positions_of_mappings_keys_values_and_lists():
    text = "a: 1\nb:\n  - x: 'é'\n    y: [1, 2]\n  - {k: é, z: 3}\nc: ñ\n"
    d = load_yaml_text(text, "f.yml")
    assert isinstance(d, Mapping) and isinstance(d["b"], Sequence)
    assert d.where == "f.yml:1:1"
    assert d.key_where("b") == "f.yml:2:1"
    assert d.value_where("a") == "f.yml:1:4"
    assert d["b"].where == "f.yml:3:3"
    first, second = d["b"]
    assert first.where == "f.yml:3:5" and first.key_where("y") == "f.yml:4:5"
    assert first["y"].where == "f.yml:4:8" and first["y"].item_where(1) == "f.yml:4:12"
    assert second.key_where("z") == "f.yml:5:12"   # flow mapping, after a non-ASCII scalar
    assert d.key_where("c") == "f.yml:6:1" and d["c"] == "ñ"
    assert d["b"].item_where(1) == "f.yml:5:5"


def test_scalars_are_plain_python_values():
    d = load_yaml_text("i: 3\nf: 1.5\nb: yes\nn: ~\ns: '3'\n", "f.yml")
    assert d == {"i": 3, "f": 1.5, "b": True, "n": None, "s": "3"}
    assert type(d["s"]) is str and type(d["i"]) is int


def test_missing_key_position_falls_back_to_mapping():
    d = load_yaml_text("x:\n  a: 1\n", "f.yml")
    assert d["x"].key_where("nope") == "f.yml:2:3"


def test_duplicate_key_names_both_lines():
    err = bad("a: 1\nb: 2\n\na: 3\n")
    assert err.msg == "duplicate key 'a' (first at line 1)"
    assert err.where == "f.yml:4:1"


def test_duplicate_key_nested():
    err = bad("t:\n  - name: x\n    name: y\n")
    assert err.where == "f.yml:3:5" and "duplicate key 'name' (first at line 2)" in err.msg


def test_merge_key_is_not_a_duplicate_and_explicit_wins():
    d = load_yaml_text("base: &b {k: 1, j: 2}\nx:\n  <<: *b\n  k: 5\n", "f.yml")
    assert d["x"] == {"k": 5, "j": 2}
    assert d["x"].key_where("k") == "f.yml:4:3"
    assert d["x"].key_where("j") == "f.yml:1:17"


def test_syntax_error_position_and_problem():
    err = bad("a: 1\nb: [1, 2\nc: d\n")
    assert err.where == "f.yml:3:2"
    assert err.msg.startswith("YAML syntax error: ")
    assert "flow sequence" in err.msg


def test_syntax_error_mapping_values():
    err = bad("a: b: c\n")
    assert err.where == "f.yml:1:5" and "mapping values are not allowed" in err.msg


def test_bad_indentation_with_tab():
    err = bad("a:\n\tb: 1\n")
    assert err.where.startswith("f.yml:2:") and "YAML syntax error" in err.msg


def test_python_tags_are_refused():
    err = bad("a: !!python/object/apply:os.system ['id']\n")
    assert err.where == "f.yml:1:4" and "could not determine a constructor" in err.msg


def test_control_character_is_reported_with_position():
    err = bad("a: 1\nb: x\x07y\n")
    assert err.where == "f.yml:2:5" and "#x0007" in err.msg


def test_unhashable_key():
    err = bad("? [a, b]\n: 1\n")
    assert err.where == "f.yml:1:3" and "plain value" in err.msg


def test_two_documents_refused():
    err = bad("a: 1\n---\nb: 2\n")
    assert err.where == "f.yml:2:1"


def test_alias_bomb_refused():
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 8):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    err = bad("\n".join(lines) + "\n")
    assert "expands to more than" in err.msg


def test_recursive_alias_refused():
    err = bad("a: &x [1, *x]\n")
    assert "recursive alias" in err.msg and err.where == "f.yml:1:4"


def test_empty_document_is_none():
    assert load_yaml_text("# nothing\n", "f.yml") is None


def test_bom_is_ignored():
    assert load_yaml_text("\ufeffa: 1\n", "f.yml") == {"a": 1}


def test_load_yaml_file_uses_path(tmp_path):
    p = tmp_path / "p.yml"
    p.write_text("a: 1\na: 2\n")
    with pytest.raises(BadInput) as info:
        load_yaml(str(p))
    assert info.value.where == f"{p}:2:1"


def test_missing_file_names_the_path(tmp_path):
    p = tmp_path / "nope.yml"
    with pytest.raises(BadInput) as info:
        load_yaml(str(p))
    assert str(p) in str(info.value) and "not found" in str(info.value)


def test_directory_and_unreadable(tmp_path):
    with pytest.raises(BadInput) as info:
        load_yaml(str(tmp_path))
    assert str(tmp_path) in str(info.value)


def test_invalid_utf8_reports_position(tmp_path):
    p = tmp_path / "b.yml"
    p.write_bytes(b"a: 1\nb: \xff\n")
    with pytest.raises(BadInput) as info:
        load_yaml(str(p))
    assert info.value.where == f"{p}:2:4" and "UTF-8" in info.value.msg


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_any_text_loads_or_gives_one_line_badinput(text):
    """Hostile input: never a traceback of another kind, never a multi-line message."""
    try:
        load_yaml_text(text, "h.yml")
    except BadInput as exc:
        assert "\n" not in str(exc)
        assert str(exc).startswith("h.yml")
