"""One vars-file loader for group_vars/host_vars, vars_files, role defaults/vars and -e @file."""
from __future__ import annotations

import pytest

from fleetops.engine.templating import UnsafeText
from fleetops.engine.varsfile import load_vars_file
from fleetops.errors import BadInput


def write(tmp_path, text: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_load_vars_file(tmp_path):
    assert load_vars_file(write(tmp_path, "a: 1\nb: [x]\n", "v.yml")) == {"a": 1, "b": ["x"]}
    assert load_vars_file(write(tmp_path, "# empty\n", "e.yml")) == {}
    with pytest.raises(BadInput) as info:
        load_vars_file(write(tmp_path, "a b: 1\n", "n.yml"))
    assert "invalid variable name 'a b'" in info.value.msg and info.value.where.endswith("n.yml:1:1")


def test_names_unchecked_where_the_caller_says_so(tmp_path):
    assert load_vars_file(write(tmp_path, "a-b: 1\n", "n.yml"), check_names=False) == {"a-b": 1}


def test_positions_for_every_key(tmp_path):
    path = write(tmp_path, "a: 1\nnested:\n  b: 2\n", "v.yml")
    data = load_vars_file(path)
    assert data.key_where("nested") == f"{path}:2:1"
    assert data["nested"].key_where("b") == f"{path}:3:3"


def test_anything_but_a_mapping_names_the_file_kind_and_what_it_got(tmp_path):
    path = write(tmp_path, "# list\n- a\n", "l.yml")
    with pytest.raises(BadInput) as info:
        load_vars_file(path, what="a role's defaults file")
    assert (info.value.where, info.value.msg) == (
        f"{path}:2:1", "a role's defaults file must be a mapping of variable names to values, got a list")


def test_json_by_name_with_a_byte_order_mark_and_duplicate_keys(tmp_path):
    path = tmp_path / "v.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": {"b": 1}}')
    assert load_vars_file(str(path)) == {"a": {"b": 1}}
    assert load_vars_file(str(path)).key_where("a") == str(path)
    path.write_text('{"a": 1, "a": 2}')
    with pytest.raises(BadInput) as info:
        load_vars_file(str(path))
    assert (info.value.where, info.value.msg) == (str(path), "duplicate key 'a'")
    path.write_text("  \n")
    assert load_vars_file(str(path)) == {}


def test_ansible_tags(tmp_path):
    """`!unsafe` stays data (never rendered); `!vault` is refused by name."""
    unsafe = write(tmp_path, "raw: !unsafe '{{ x }}'\n", "u.yml")
    data = load_vars_file(unsafe)
    assert data == {"raw": "{{ x }}"} and isinstance(data["raw"], UnsafeText)
    vault = write(tmp_path, "pw: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n", "s.yml")
    with pytest.raises(BadInput) as info:
        load_vars_file(vault)
    assert (info.value.where, info.value.msg) == (
        f"{vault}:1:5", "Ansible Vault values (!vault) are not supported: decrypt them first")
