"""The INI reader's fast paths give exactly what ansible-core's rules give: shlex for a host
line, ast.literal_eval for a value. Checked over many generated texts, the shapes a fleet's
inventory has and the ones that sit at the paths' edges."""
from __future__ import annotations

import ast
import json
import random
import shlex
import subprocess
import sys
import warnings

import pytest

from fleetops.engine.inventory import load_inventory, parse_ini_value
from fleetops.engine.inventory.ini_format import _host_line_tokens
from fleetops.engine.inventory.model import short_name

_ALPHABET = "aZ_09.-/:@'\"\\#=[](){}+* \tTrueFalsNonejx\u00e9"
_EDGES = ["True", "False", "None", "Truex", "True-1", "True-1j", "None.x", "set()", "lambda:x", "not",
          "0", "00", "007", "10", "1_000", "0x10", "1e5", "10.5", "1.2.3", "10.0.0.1", "1.2.3.4.5",
          "-5", "+5", "[1, 2]", "{'a': 1}", "'x'", "b'x'", "r'x'", "u'x'", "x", "_", "__debug__",
          "a.b", "a-b", "a/b", "a:b", "user@host", "/usr/bin/python3", "p3", "123456789012345678901",
          "9" * 18, "1" + "0" * 17, "True ", " True", "\u00e9t\u00e9", ""]


def _literal(text):
    """ansible-core's rule, written here on its own: the literal, else the text."""
    with warnings.catch_warnings(record=True):
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text


def _texts(n, seed):
    rng = random.Random(seed)
    return [''.join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 12))) for _ in range(n)]


@pytest.mark.parametrize("text", _EDGES)
def test_a_value_at_the_fast_paths_edges_is_what_literal_eval_makes_of_it(text):
    got, want = parse_ini_value(text), _literal(text)
    assert (type(got), got) == (type(want), want)


def test_generated_values_are_what_literal_eval_makes_of_them():
    for text in _texts(20000, 1):
        got, want = parse_ini_value(text), _literal(text)
        assert (type(got), repr(got)) == (type(want), repr(want)), text


def test_generated_host_lines_split_as_shlex_splits_them():
    for line in _texts(20000, 2) + ["web01 ansible_host=10.0.0.1\tansible_user=hermes rack=3",
                                    "web02 a=1 # a comment", "web03 msg='two words'", "w x=a\\ b"]:
        line = line.strip()
        try:
            want = shlex.split(line, comments=True)
        except ValueError:
            with pytest.raises(Exception, match="cannot parse host line"):
                _host_line_tokens(line, "inv:1:1")
            continue
        assert _host_line_tokens(line, "inv:1:1") == want, line


@pytest.mark.parametrize("name", ["10.0.0.1", "::1", "fe80::1%eth0", "web01.example.net", "1.2.3.x",
                                  "1.2.3", "3web.example", "web", "2001:db8::1", "10.0.0.1.example"])
def test_short_name_keeps_an_address_whole_and_cuts_a_name_at_its_first_dot(name):
    import ipaddress
    try:
        ipaddress.ip_address(name)
        want = name
    except ValueError:
        want = name.split(".", 1)[0]
    assert short_name(name) == want


def test_ungrouped_hosts_are_the_hosts_in_no_other_group(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text("".join(f"h{i}\n" for i in range(300)) + "[g]\nh1\nh5\n[g2]\nh7\n")
    model = load_inventory(str(inv))
    assert model.groups["ungrouped"].hosts == [f"h{i}" for i in range(300) if i not in (1, 5, 7)]
    assert model.groups["g"].hosts == ["h1", "h5"]


def test_hosts_json_is_the_whole_document_as_json_dumps_writes_it(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text("[web]\nweb[01:40].example ansible_user=hermes rack=2 tags='[1, 2]'\n"
                   "[db]\ndb1 ansible_host=10.0.0.9 db_password=s3cr3t\n[all:vars]\nregion=eu\n")
    out = subprocess.run([sys.executable, "-m", "fleetops", "hosts", "-i", str(inv), "--json"],
                         capture_output=True, text=True, check=True).stdout
    doc = json.loads(out)
    assert out == json.dumps(doc, ensure_ascii=False) + "\n"
    assert list(doc["hosts"]) == [f"web{i:02d}.example" for i in range(1, 41)] + ["db1"]
    assert doc["hosts"]["db1"]["db_password"] == "********"
    assert doc["hosts"]["web07.example"]["tags"] == [1, 2]
