"""Inventory loading, Ansible's variable precedence, group_vars/host_vars, bad inventories, connection params.

Expected values in tests/data/inventories/*/ansible-expected.json were produced by
ansible-core 2.19 on the same files, so these tests pin real Ansible behaviour.
"""
from __future__ import annotations

import json
import os
import textwrap

import pytest

from fleetops.engine.inventory import (Inventory, detect_format, expand_host_range, load_inventory,
                                       parse_ini_value)
from fleetops.errors import BadInput
from tests.support.paths import DATA

DATA = os.path.join(DATA, "inventories")
FLEET_YML = os.path.join(DATA, "fleet", "hosts.yml")
FLEET_INI = os.path.join(DATA, "fleet", "hosts.ini")
PRECEDENCE = os.path.join(DATA, "precedence", "hosts.yml")
MAGIC = ("inventory_hostname", "inventory_hostname_short", "group_names")


def expected(name: str) -> dict:
    with open(os.path.join(DATA, name, "ansible-expected.json")) as fh:
        return json.load(fh)


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def without_magic(variables: dict) -> dict:
    return {k: v for k, v in variables.items() if k not in MAGIC}


# ---------------------------------------------------------------------------- formats

def test_yaml_and_ini_give_identical_inventories():
    yml, ini = load_inventory(FLEET_YML), load_inventory(FLEET_INI)
    assert list(yml.hosts) == list(ini.hosts)
    assert yml.groups_map() == ini.groups_map()
    for name in yml.hosts:
        assert yml.get_vars(name) == ini.get_vars(name), name
        assert yml.hosts[name].groups == ini.hosts[name].groups, name
    for name, group in yml.groups.items():
        other = ini.groups[name]
        assert (group.children, group.parents, group.depth, group.priority) == \
               (other.children, other.parents, other.depth, other.priority), name


def test_declaration_order_is_inventory_order():
    inv = load_inventory(FLEET_YML)
    assert list(inv.hosts) == ["bastion", "eu01.example.com", "eu02.example.com", "eu03.example.com",
                               "us01.example.com", "us02.example.com"]


@pytest.mark.parametrize("path", [FLEET_YML, FLEET_INI])
def test_host_vars_match_ansible_core(path):
    want = expected("fleet")
    inv = load_inventory(path)
    assert set(inv.hosts) == set(want["hostvars"])
    for name, hostvars in want["hostvars"].items():
        assert without_magic(inv.get_vars(name)) == hostvars, name


@pytest.mark.parametrize("name", ["fleet", "precedence"])
def test_magic_vars_and_groups_match_ansible_core(name):
    want = expected(name)
    inv = load_inventory(os.path.join(DATA, name, "hosts.yml"))
    for host, magic in want["magic"].items():
        got = inv.get_vars(host)
        assert got["inventory_hostname"] == host
        assert got["group_names"] == magic["group_names"]
        assert got["inventory_hostname_short"] == magic["inventory_hostname_short"]
    groups = inv.groups_map()
    # `all`: its own hosts, `ungrouped`, then each group's (ansible-core's order; see tests/compat)
    assert sorted(groups.pop("all")) == sorted(inv.hosts)
    want_groups = dict(want["groups"])
    assert sorted(want_groups.pop("all")) == sorted(inv.hosts)
    assert groups == want_groups


def test_inventory_hostname_short_and_group_names():
    v = load_inventory(FLEET_YML).get_vars("us02.example.com")
    assert v["inventory_hostname_short"] == "us02"
    assert v["group_names"] == ["canary", "hermes", "hermes_us"]
    assert load_inventory(FLEET_YML).get_vars("bastion")["group_names"] == ["ungrouped"]


def test_group_tree_depth_priority_and_host_groups():
    inv = load_inventory(FLEET_YML)
    g = inv.groups
    assert (g["all"].depth, g["hermes"].depth, g["hermes_us"].depth) == (0, 1, 2)
    assert g["hermes"].children == ["hermes_eu", "hermes_us"]
    assert g["hermes_us"].parents == ["hermes"]
    assert g["hermes_us"].priority == 10 and g["hermes_eu"].priority == 1
    assert "ansible_group_priority" not in g["hermes_us"].vars
    assert g["hermes_us"].hosts == ["us01.example.com", "us02.example.com"]
    assert g["ungrouped"].hosts == ["bastion"]
    assert g["all"].hosts == list(inv.hosts)
    # sorted as Ansible applies them: depth, then priority, then name
    assert inv.hosts["us02.example.com"].groups == ["all", "canary", "hermes", "hermes_us"]
    assert inv.hosts["bastion"].groups == ["all", "ungrouped"]
    assert inv.hosts["us01.example.com"].vars["ansible_user"] == "ops"


def test_get_vars_is_a_copy():
    inv = load_inventory(FLEET_YML)
    v = inv.get_vars("us01.example.com")
    v["us_only"].append(99)
    v["api"]["token"] = "changed"
    again = inv.get_vars("us01.example.com")
    assert again["us_only"] == [1, 2] and again["api"]["token"] == "abcd1234"


def test_unknown_host_is_bad_input():
    with pytest.raises(BadInput, match="unknown host 'nope'"):
        load_inventory(FLEET_YML).get_vars("nope")


# ---------------------------------------------------------------------------- precedence

@pytest.mark.parametrize("var,layer", [("v1", "L1"), ("v2", "L2"), ("v3", "L3"), ("v4", "L4"),
                                       ("v5", "L5"), ("v6", "L6")])
def test_each_layer_overrides_the_one_below(var, layer):
    assert load_inventory(PRECEDENCE).get_vars("h1")[var] == layer


def test_precedence_matches_ansible_core():
    inv = load_inventory(PRECEDENCE)
    for host, hostvars in expected("precedence")["hostvars"].items():
        assert without_magic(inv.get_vars(host)) == hostvars, host


def test_child_group_overrides_parent_within_a_layer():
    v = load_inventory(PRECEDENCE).get_vars("h1")
    assert v["pc"] == "child"      # inventory-file vars: child (deeper) wins
    assert v["gpc"] == "child"     # group_vars/: child wins


def test_group_vars_of_parent_beat_inventory_vars_of_child():
    # Ansible applies all inventory-file group vars before any group_vars/ file.
    assert load_inventory(PRECEDENCE).get_vars("h1")["cross"] == "parent_gv"


def test_group_priority_then_name_decide_between_siblings():
    v = load_inventory(PRECEDENCE).get_vars("h2")
    assert v["prio"] == "high"     # priority 5 beats 1 although 'high' < 'low' by name
    assert v["by_name"] == "zzz"   # same depth and priority: later name wins


def test_group_priority_in_group_vars_is_ignored():
    inv = load_inventory(PRECEDENCE)
    assert inv.groups["low"].priority == 1
    assert inv.get_vars("h2")["prio_gv"] == "high"


def test_var_origins_point_at_file_line_col():
    inv = load_inventory(PRECEDENCE)
    origins = inv.var_origins("h1")
    assert origins["v5"] == f"{PRECEDENCE}:13:18"
    assert origins["v6"] == os.path.join(DATA, "precedence", "host_vars", "h1.yml") + ":1:1"
    ini = load_inventory(FLEET_INI).var_origins("us01.example.com")
    assert ini["ansible_user"] == f"{FLEET_INI}:12:23"
    assert ini["region"] == f"{FLEET_INI}:35:1"


# ---------------------------------------------------------------------------- group_vars / host_vars

def test_vars_directory_files_are_read_in_sorted_order_and_other_extensions_skipped():
    v = load_inventory(FLEET_YML).get_vars("eu03.example.com")
    assert v["backup_keep"] == 30          # 20-override.yaml after 10-base.yml
    assert "ignored" not in v              # notes.txt has a foreign extension


def test_json_group_vars_and_host_vars_directory():
    v = load_inventory(FLEET_YML).get_vars("us01.example.com")
    assert v["us_only"] == [1, 2] and v["layer"] == "us_gv"
    assert v["db_password"] == "hunter22" and v["api"] == {"token": "abcd1234"}


def test_vars_file_without_extension_and_nested_directories(tmp_path):
    inv = write(tmp_path, "hosts", "[web]\nw1\n")
    write(tmp_path, "group_vars/web", "a: plain\n")
    write(tmp_path, "host_vars/w1/sub/deeper.yml", "b: nested\n")
    write(tmp_path, "host_vars/w1/.hidden.yml", "b: hidden\n")
    write(tmp_path, "host_vars/w1/old.yml~", "b: backup\n")
    v = load_inventory(inv).get_vars("w1")
    assert (v["a"], v["b"]) == ("plain", "nested")


def test_first_vars_source_wins_like_ansible(tmp_path):
    # Ansible reads only the first of <name>, <name>.yml, <name>.yaml, <name>.json.
    inv = write(tmp_path, "hosts.ini", "[web]\nw1\n")
    write(tmp_path, "group_vars/web/main.yml", "src: dir\n")
    write(tmp_path, "group_vars/web.yml", "src: yml\nonly_yml: 1\n")
    write(tmp_path, "host_vars/w1.yaml", "src: yaml\n")
    write(tmp_path, "host_vars/w1.json", '{"src": "json"}')
    inv = load_inventory(inv)
    assert inv.groups["web"].vars == {"src": "dir"}
    assert inv.hosts["w1"].vars == {"src": "yaml"}


def test_empty_vars_file_and_group_vars_for_unknown_group_are_fine(tmp_path):
    inv = write(tmp_path, "hosts.ini", "[web]\nw1\n")
    write(tmp_path, "group_vars/web.yml", "# nothing yet\n")
    write(tmp_path, "group_vars/retired.yml", "x: 1\n")
    assert without_magic(load_inventory(inv).get_vars("w1")) == {}


def test_ansible_yaml_tags(tmp_path):
    inv = write(tmp_path, "hosts.yml", "all:\n  vars:\n    raw: !unsafe '{{ not_templated }}'\n")
    assert load_inventory(inv).groups["all"].vars["raw"] == "{{ not_templated }}"
    inv = write(tmp_path, "hosts.yml", "all:\n  vars:\n    pw: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n")
    with pytest.raises(BadInput) as err:
        load_inventory(inv)
    assert err.value.where == f"{inv}:3:9"
    assert err.value.msg == "Ansible Vault values (!vault) are not supported: decrypt them first"


def test_yaml_merge_keys_are_not_duplicates(tmp_path):
    inv = write(tmp_path, "hosts.yml", """\
        all:
          vars:
            base: &base {a: 1, b: 2}
            merged:
              <<: *base
              b: 3
    """)
    assert load_inventory(inv).groups["all"].vars["merged"] == {"a": 1, "b": 3}


# ---------------------------------------------------------------------------- INI details

@pytest.mark.parametrize("text,value", [
    ("5", 5), ("-3", -3), ("1.5", 1.5), ("True", True), ("False", False), ("None", None),
    ("yes", "yes"), ("true", "true"), ("'quoted'", "quoted"), ('"5"', "5"), ("[1, 2]", [1, 2]),
    ("{'a': 1}", {"a": 1}), ("10.0.0.1", "10.0.0.1"), ("/path/x", "/path/x"), ("0x10", 16), ("", ""),
])
def test_ini_value_literals_follow_ansible(text, value):
    assert parse_ini_value(text) == value
    assert type(parse_ini_value(text)) is type(value)


def test_ini_host_line_quotes_comments_and_port(tmp_path):
    inv = write(tmp_path, "hosts.ini", """\
        ; a comment
        h1:2201 msg="hello world" n=7 flag=True # trailing comment
        [web]
        [::1]:2202
        fe80::1
        [web:vars]
        note = kept # as Ansible keeps it
        quoted='x y'
    """)
    inv = load_inventory(inv)
    v = inv.get_vars("h1")
    assert (v["ansible_port"], v["msg"], v["n"], v["flag"]) == (2201, "hello world", 7, True)
    assert "trailing" not in v and "comment" not in v
    assert inv.get_vars("::1")["ansible_port"] == 2202
    assert "ansible_port" not in inv.get_vars("fe80::1")
    assert inv.get_vars("fe80::1")["note"] == "kept # as Ansible keeps it"
    assert inv.get_vars("fe80::1")["quoted"] == "x y"
    assert inv.groups_map()["ungrouped"] == ["h1"]


def test_ini_children_may_be_declared_later_and_repeated_host_merges_vars(tmp_path):
    inv = write(tmp_path, "hosts.ini", """\
        [prod:children]
        web
        [web]
        w1 a=1 b=1
        [other]
        w1 b=2
    """)
    inv = load_inventory(inv)
    assert inv.groups["web"].parents == ["prod"]
    assert inv.hosts["w1"].vars == {"a": 1, "b": 2}
    assert list(inv.hosts) == ["w1"]


# ---------------------------------------------------------------------------- ranges and detection

@pytest.mark.parametrize("pattern,hosts", [
    ("web[01:03]", ["web01", "web02", "web03"]),
    ("web[1:3].x", ["web1.x", "web2.x", "web3.x"]),
    ("n[0:10:5]", ["n0", "n5", "n10"]),
    ("db-[a:c]", ["db-a", "db-b", "db-c"]),
    ("r[1:2]c[a:b]", ["r1ca", "r1cb", "r2ca", "r2cb"]),
    ("plain", ["plain"]),
])
def test_host_ranges(pattern, hosts):
    assert expand_host_range(pattern) == hosts


def test_yaml_host_range_with_port(tmp_path):
    inv = load_inventory(write(tmp_path, "hosts.yml", "all:\n  hosts:\n    w[1:2]:2222: {x: 1}\n"))
    assert list(inv.hosts) == ["w1", "w2"]
    assert inv.get_vars("w2")["ansible_port"] == 2222


@pytest.mark.parametrize("text,fmt", [
    ("all:\n  hosts:\n", "yaml"), ("---\nall:\n", "yaml"), ("# c\nweb:\n  hosts:\n", "yaml"),
    ("[web]\nw1\n", "ini"), ("w1 ansible_host=1.2.3.4\n", "ini"), ("w1\nw2\n", "ini"), ("w1:2222\n", "ini"),
])
def test_format_detected_from_content_without_extension(text, fmt):
    assert detect_format("/x/hosts", text) == fmt


def test_extension_decides_format():
    assert detect_format("a.yaml", "[web]") == "yaml"
    assert detect_format("a.ini", "all:") == "ini"


def test_extensionless_yaml_inventory_loads(tmp_path):
    inv = load_inventory(write(tmp_path, "inventory", "all:\n  hosts:\n    h1: {a: 1}\n"))
    assert inv.get_vars("h1")["a"] == 1
    assert isinstance(inv, Inventory) and inv.path.endswith("inventory")


def test_empty_inventory_has_no_hosts(tmp_path):
    inv = load_inventory(write(tmp_path, "hosts.yml", "# nothing\n"))
    assert inv.hosts == {} and inv.groups_map() == {"all": [], "ungrouped": []}


# ---------------------------------------------------------------------------- bad inventories

BAD = os.path.join(DATA, "bad")

BAD_CASES = [
    ("dup_host.yml", "5:5", "duplicate key 'h1' (first at line 3)"),
    ("dup_var.yml", "5:5", "duplicate key 'a' (first at line 3)"),
    ("syntax.yml", "4:11",
     "YAML syntax error: did not find expected ',' or '}' (while parsing a flow mapping at line 3)"),
    ("host_list.yml", "5:9", "host 'w1' in group 'web' must be a mapping of variables or empty, got a list"),
    ("hosts_list.yml", "4:7",
     "'hosts' of group 'web' must be a mapping of host names to their variables, got a list"),
    ("vars_list.yml", "4:7", "'vars' of group 'web' must be a mapping of variable names to values, got a list"),
    ("unknown_key.yml", "4:7", "unknown key 'host' in group 'web' (expected hosts, children or vars)"),
    ("cycle.yml", "5:9", "group 'a' would be its own ancestor: a -> b -> a"),
    ("top_list.yml", "1:1", "a YAML inventory must be a mapping of groups (such as 'all:'), got a list"),
    ("bad_range.yml", "3:5",
     "bad host range 'web[05:1]': zero-padded begin and end must have equal length"),
    ("cycle.ini", "5:1", "group 'b' would be its own ancestor: b -> a -> b"),
    ("self_child.ini", "5:1", "group 'web' would be its own ancestor: web -> web"),
    ("unknown_section.ini", "4:1",
     "section [web:child] has unknown type 'child' (expected [web], [web:children] or [web:vars])"),
    ("bad_header.ini", "3:1", "invalid section header '[db two]' (expected [group], [group:children] "
                              "or [group:vars], without spaces)"),
    ("undefined_child.ini", "2:1", "section [web:children] includes undefined group 'missing'"),
    ("undefined_vars.ini", "3:1", "section [dbs:vars] is for undefined group 'dbs'"),
    ("host_token.ini", "2:4", "expected key=value host variable, got 'ansible_port'"),
    ("bad_priority.ini", "4:1", "group 'web': ansible_group_priority must be an integer, got 'high'"),
]


@pytest.mark.parametrize("name,line_col,msg", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_inventory_is_one_line_with_where(name, line_col, msg):
    path = os.path.join(BAD, name)
    with pytest.raises(BadInput) as err:
        load_inventory(path)
    assert err.value.where == f"{path}:{line_col}"
    assert err.value.msg == msg
    assert "\n" not in str(err.value)


def test_bad_group_vars_file_names_the_vars_file():
    with pytest.raises(BadInput) as err:
        load_inventory(os.path.join(BAD, "bad_group_vars", "hosts.yml"))
    assert err.value.where == os.path.join(BAD, "bad_group_vars", "group_vars", "web.yml") + ":2:1"
    assert err.value.msg == "a vars file must be a mapping of variable names to values, got a list"


def test_bad_json_vars_file(tmp_path):
    inv = write(tmp_path, "hosts.ini", "[web]\nw1\n")
    bad = write(tmp_path, "host_vars/w1.json", '{"a": 1,\n "a": 2}')
    with pytest.raises(BadInput) as err:
        load_inventory(inv)
    assert (err.value.where, err.value.msg) == (bad, "duplicate key 'a'")
    write(tmp_path, "host_vars/w1.json", '{"a": 1,\n "b": }')
    with pytest.raises(BadInput) as err:
        load_inventory(inv)
    assert (err.value.where, err.value.msg) == (f"{bad}:2:7", "JSON syntax error: Expecting value")


def test_missing_inventory_and_directory(tmp_path):
    missing = str(tmp_path / "nope.yml")
    with pytest.raises(BadInput) as err:
        load_inventory(missing)
    assert (err.value.where, err.value.msg) == (missing, "file not found")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "README.md").write_text("[web]\nnot-a-host\n")   # ignored, as ansible-core does
    with pytest.raises(BadInput) as err:
        load_inventory(str(tmp_path))
    assert (err.value.where, err.value.msg) == (str(tmp_path), "inventory directory holds no inventory file")


def test_non_utf8_inventory(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_bytes(b"[web]\nw1\nw\xff2\n")
    with pytest.raises(BadInput) as err:
        load_inventory(str(path))
    assert (err.value.where, err.value.msg) == (f"{path}:3", "not UTF-8 text")


@pytest.mark.parametrize("pattern,msg", [
    ("web[5:1]", "begin is after end"),
    ("web[1:2:0]", "step must be a positive integer"),
    ("web[1:]", "no end value"),
    ("web[1:x]", "bounds must be numbers or single letters"),
    ("web[1:2:3:4]", "must be [begin:end] or [begin:end:step]"),
])
def test_bad_host_ranges(pattern, msg):
    with pytest.raises(BadInput) as err:
        expand_host_range(pattern, where="inv:1:1")
    assert err.value.msg == f"bad host range '{pattern}': {msg}" and err.value.where == "inv:1:1"


def test_all_cannot_be_a_child(tmp_path):
    path = write(tmp_path, "hosts.ini", "[web]\nw1\n[web:children]\nall\n")
    with pytest.raises(BadInput) as err:
        load_inventory(path)
    assert (err.value.where, err.value.msg) == (f"{path}:4:1", "group 'all' cannot be a child of group 'web'")


def test_host_vars_as_a_string_is_bad(tmp_path):
    path = write(tmp_path, "hosts.yml", "all:\n  hosts:\n    h1: 10.0.0.1\n")
    with pytest.raises(BadInput) as err:
        load_inventory(path)
    assert err.value.where == f"{path}:3:5"
    assert err.value.msg == "host 'h1' in group 'all' must be a mapping of variables or empty, got a string"


# ---------------------------------------------------------------------------- connection params

NO_SSH_CONFIG = os.devnull  # an empty ssh_config: these tests see only inventory variables


def conn(tmp_path, text, host="h1", ssh_config=NO_SSH_CONFIG):
    inv = load_inventory(write(tmp_path, "hosts.yml", text))
    return inv.connection_params(host, ssh_config_path=ssh_config)


def test_connection_defaults(tmp_path):
    p = conn(tmp_path, "all:\n  hosts:\n    h1:\n")
    assert (p.name, p.address, p.port, p.user, p.key_file, p.python, p.become_user, p.proxy_jump,
            p.known_hosts) == ("h1", "h1", 22, None, None, None, None, None, None)
    assert (p.connect_timeout, p.command_timeout) == (10.0, 600.0)


def test_ansible_connection_vars(tmp_path):
    p = conn(tmp_path, """\
        all:
          vars:
            ansible_user: hermes
          hosts:
            h1:
              ansible_host: 10.1.1.1
              ansible_port: "2200"
              ansible_ssh_private_key_file: ~/keys/id_fleet
              ansible_python_interpreter: /usr/bin/python3.11
              ansible_become_user: hermes
    """)
    assert (p.address, p.port, p.user, p.python, p.become_user) == \
           ("10.1.1.1", 2200, "hermes", "/usr/bin/python3.11", "hermes")
    assert p.key_file == os.path.expanduser("~/keys/id_fleet")


def test_fleetops_prefix_wins_over_ansible(tmp_path):
    p = conn(tmp_path, """\
        all:
          hosts:
            h1:
              ansible_host: 10.1.1.1
              fleetops_host: 10.2.2.2
              ansible_port: 22
              fleetops_port: 2202
              ansible_user: a
              fleetops_user: f
              ansible_ssh_private_key_file: /a/key
              fleetops_ssh_private_key_file: /f/key
              ansible_python_interpreter: /a/python3
              fleetops_python_interpreter: /f/python3
              ansible_become_user: a
              fleetops_become_user: f
              fleetops_known_hosts: ~/fleet_known_hosts
              fleetops_connect_timeout: 3
              fleetops_command_timeout: "90.5"
    """)
    assert (p.address, p.port, p.user, p.key_file, p.python, p.become_user) == \
           ("10.2.2.2", 2202, "f", "/f/key", "/f/python3", "f")
    assert p.known_hosts == os.path.expanduser("~/fleet_known_hosts")
    assert (p.connect_timeout, p.command_timeout) == (3.0, 90.5)


@pytest.mark.parametrize("value", ["ssh", "22x", True, 0, 70000, [22]])
def test_bad_port_names_host_and_variable(tmp_path, value):
    path = write(tmp_path, "hosts.yml", "all:\n  hosts:\n    h1:\n      ansible_port: %s\n" % json.dumps(value))
    inv = load_inventory(path)
    with pytest.raises(BadInput) as err:
        inv.connection_params("h1", ssh_config_path=NO_SSH_CONFIG)
    assert err.value.where == f"{path}:4:7"
    assert err.value.msg == f"host 'h1': variable 'ansible_port' must be an integer port 1-65535, got {value!r}"


@pytest.mark.parametrize("var", ["fleetops_connect_timeout", "fleetops_command_timeout"])
def test_bad_timeout_names_host_and_variable(tmp_path, var):
    with pytest.raises(BadInput, match=f"host 'h1': variable '{var}' must be a number of seconds > 0, got 'soon'"):
        conn(tmp_path, f"all:\n  hosts:\n    h1:\n      {var}: soon\n")


def test_templated_connection_var_needs_a_renderer(tmp_path):
    text = "all:\n  vars:\n    ip: 10.9.9.9\n  hosts:\n    h1:\n      ansible_host: '{{ ip }}'\n"
    with pytest.raises(BadInput, match="connection variable 'ansible_host' is a template"):
        conn(tmp_path, text)
    inv = load_inventory(str(tmp_path / "hosts.yml"))
    p = inv.connection_params("h1", NO_SSH_CONFIG, render=lambda s: s.replace("{{ ip }}", "10.9.9.9"))
    assert p.address == "10.9.9.9"


def test_ini_port_from_host_line_reaches_params(tmp_path):
    inv = load_inventory(write(tmp_path, "hosts.ini", "[web]\nw1:2299 ansible_user=deploy\n"))
    p = inv.connection_params("w1", ssh_config_path=NO_SSH_CONFIG)
    assert (p.address, p.port, p.user) == ("w1", 2299, "deploy")


@pytest.mark.parametrize("value, expected", [("true", True), ("yes", True), ("1", True), ("True", True),
                                             ("false", False), ("no", False), ("0", False)])
def test_ansible_become_in_inventory(tmp_path, value, expected):
    text = f"all:\n  hosts:\n    h1:\n      ansible_become: {value}\n      ansible_become_user: hermes\n"
    p = conn(tmp_path, text)
    assert (p.become, p.become_user) == (expected, "hermes")
    assert conn(tmp_path, "all:\n  hosts:\n    h1: {}\n").become is False
    # INI spells it as text
    ini = write(tmp_path, "hosts.ini", f"h1 ansible_become={value.lower()}\n")
    assert load_inventory(ini).connection_params("h1", ssh_config_path=NO_SSH_CONFIG).become is expected


def test_bad_ansible_become_names_host_and_variable(tmp_path):
    with pytest.raises(BadInput, match="host 'h1': variable 'fleetops_become' must be true or false, got 'maybe'"):
        conn(tmp_path, "all:\n  hosts:\n    h1:\n      fleetops_become: maybe\n")
