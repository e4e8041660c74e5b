"""Host patterns on tests/data/inventories/patterns.yml, evaluated like Ansible."""
from __future__ import annotations

import os

import pytest

from fleetops.engine import patterns
from fleetops.engine.inventory import load_inventory
from fleetops.errors import BadInput
from tests.support.paths import DATA

PATH = os.path.join(DATA, "inventories", "patterns.yml")
ALL = ["bastion", "web01", "web02", "web03", "db01", "db02", "db03", "edge.example.com"]


@pytest.fixture(scope="module")
def inv():
    return load_inventory(PATH)


@pytest.mark.parametrize("pattern,hosts", [
    ("all", ALL),
    ("*", ALL),
    ("web", ["web01", "web02", "web03"]),
    ("db", ["db01", "db02", "db03"]),                      # includes child group db_replica
    ("db_replica", ["db03"]),
    ("web02", ["web02"]),
    ("ungrouped", ["bastion"]),
    ("web.edge", ["edge.example.com"]),                     # a group name with a dot
    ("web*", ["web01", "web02", "web03", "edge.example.com"]),  # groups web, web.edge and hosts
    ("db0?", ["db01", "db02", "db03"]),
    ("*.example.com", ["edge.example.com"]),
    ("~web0[12]", ["web01", "web02"]),
    ("~(web|db)01", ["web01", "db01"]),
    ("~eb", []),                                            # regexes match from the start, like Ansible
    ("nohost", []),
])
def test_single_elements(inv, pattern, hosts):
    assert patterns.match(pattern, inv) == hosts


@pytest.mark.parametrize("pattern,hosts", [
    ("web:db", ["web01", "web02", "web03", "db01", "db02", "db03"]),
    ("db:web", ["db01", "db02", "db03", "web01", "web02", "web03"]),   # union order, as ansible-core
    ("db,web02", ["db01", "db02", "db03", "web02"]),
    (" web02 , db01 ", ["web02", "db01"]),
    ("web:&eu", ["web02"]),
    ("web:&eu:&canary", []),
    ("db:&canary", ["db03"]),
    ("all:!canary", ["bastion", "web01", "web02", "db01", "db02", "edge.example.com"]),
    ("web:db:!eu", ["web01", "web03", "db02"]),
    ("!web", ["bastion", "db01", "db02", "db03", "edge.example.com"]),     # starts from all
    ("&eu", ["web02", "db01", "db03"]),
    ("!~.*0[13]", ["bastion", "web02", "db02", "edge.example.com"]),
    ("web*:!web.edge", ["web01", "web02", "web03"]),
])
def test_combinations(inv, pattern, hosts):
    assert patterns.match(pattern, inv) == hosts


def test_unions_then_intersections_then_exclusions(inv):
    # Written order is irrelevant: web ∪ us, then minus canary (web03 stays out).
    assert patterns.match("web:!canary:us", inv) == ["web01", "web02", "db02"]
    assert patterns.match("!canary:us:web", inv) == ["web01", "db02", "web02"]   # us first, then web
    # Intersections apply to the whole union, before any exclusion.
    assert patterns.match("!canary:web:&us", inv) == ["web01"]
    assert patterns.match("web:&us:db", inv) == ["web01", "web03", "db02"]


@pytest.mark.parametrize("pattern,hosts", [
    ("web[0]", ["web01"]),
    ("web[-1]", ["web03"]),
    ("web[1:2]", ["web02", "web03"]),
    ("web[1:]", ["web02", "web03"]),
    ("db[0:1]", ["db01", "db02"]),       # own hosts before the child group's
    ("web[7]", []),
    ("web[0]:db[-1]", ["web01", "db03"]),
])
def test_subscripts(inv, pattern, hosts):
    assert patterns.match(pattern, inv) == hosts


def test_inventory_select_delegates(inv):
    assert inv.select("web:&eu") == ["web02"]


@pytest.mark.parametrize("pattern,msg", [
    ("", "empty host pattern"),
    ("   ", "empty host pattern"),
    ("web:", "bad host pattern 'web:': empty element"),
    (":web", "bad host pattern ':web': empty element"),
    ("web::db", "bad host pattern 'web::db': empty element"),
    ("web,,db", "bad host pattern 'web,,db': empty element"),
    ("&", "bad host pattern '&': '&' must be followed by a group or host"),
    ("!", "bad host pattern '!': '!' must be followed by a group or host"),
    ("web:&", "bad host pattern 'web:&': '&' must be followed by a group or host"),
    ("web:! ", "bad host pattern 'web:! ': '!' must be followed by a group or host"),
    ("!!web", "bad host pattern '!!web': '!!web' has two operators"),
    ("web:&!db", "bad host pattern 'web:&!db': '&!db' has two operators"),
    ("~", "bad host pattern '~': '~' needs a regular expression"),
    ("web:~db(", "bad host pattern 'web:~db(': invalid regular expression 'db(': "
                 "missing ), unterminated subpattern at position 2"),
])
def test_bad_syntax_is_bad_input_naming_the_pattern(inv, pattern, msg):
    with pytest.raises(BadInput) as err:
        patterns.match(pattern, inv)
    assert err.value.msg == msg


def test_parse_checks_syntax_without_an_inventory():
    assert patterns.parse("!canary:web:&us") == [("", "web"), ("&", "us"), ("!", "canary")]
    assert patterns.parse("!web") == [("", "all"), ("!", "web")]
    with pytest.raises(BadInput):
        patterns.parse("web:&")


def test_non_string_pattern(inv):
    with pytest.raises(BadInput, match="host pattern must be a string"):
        patterns.match(["web"], inv)
