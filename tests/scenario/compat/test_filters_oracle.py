"""ansible.builtin's filters and tests, each rendered by fleetops' templar and by ansible-core's
own (imported here, in the test only, as the oracle) on the same expression and variables."""
from __future__ import annotations

import json

import pytest

from fleetops.engine.templating import Templar, TemplateError
from tests.support import oracle

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

VARS = {"a": [1, 2, 3, 2], "b": [2, 4], "s": "Hello World", "d": {"x": 1, "y": [1, 2]},
        "users": [{"name": "u1", "groups": ["g1", "g2"]}, {"name": "u2", "groups": []}],
        "url": "https://user:pw@www.example.com:9000/dir/index.html?q=1&r=2#frag",
        "people": [{"n": "a", "k": 1}, {"n": "b", "k": 2}]}
EXPRESSIONS = [
    "a | difference(b)", "a | union(b)", "a | intersect(b)", "a | symmetric_difference(b)", "a | unique",
    "a | min", "a | max", "people | max(attribute='k')", "100 | log(10)", "8 | log(2)", "2 | pow(10)",
    "81 | root(4)", "16 | root", "'1K' | human_to_bytes", "'2.5 MB' | human_to_bytes", "1024 | human_readable",
    "['a', 'b', '/c'] | path_join", "'x/y.tar.gz' | splitext", "'a%20b+c%2F' | urldecode",
    "url | urlsplit", "url | urlsplit('hostname')", "url | urlsplit('port')", "url | urlsplit('query')",
    "'a,b,,c' | split(',')", "s | split", "'abc' | regex_findall('[ab]')", "'a.b*c' | regex_escape",
    "'x' | to_uuid", "[1, 2] | zip(['a', 'b'])", "[1, 2, 3] | zip_longest(['a'], fillvalue='-')",
    "[1, 2, 3] | permutations(2) | list", "[1, 2, 3] | combinations(2) | list", "[1, 2] | product(['a']) | list",
    "people | rekey_on_member('n')", "users | subelements('groups')", "'b' | extract({'b': 7})",
    "[0, 1] | map('extract', ['x', 'y']) | list", "s | type_debug", "d | type_debug", "'x' | md5",
    "'x' | sha1", "'x' | checksum", "'x' | hash('sha256')", "[[1, [2]], 3] | flatten", "[[1, [2]], 3] | flatten(1)",
    "d | dict2items", "d | combine({'z': 2})", "'a b' | quote", "'x' | b64encode", "'eA==' | b64decode",
    "'/a/b/c' | basename", "'/a/b/c' | dirname", "'yes' | bool", "true | ternary('y', 'n')",
    "s | regex_replace('o', '0')", "s | regex_search('W(or)')", "s | comment",
    "[1, 2] is contains(1)", "a is contains(9)", "[1] is subset(a)", "a is superset([1, 2])",
    "'x' is truthy", "'' is falsy", "url is url", "url is uri", "'urn:isbn:0451450523' is urn",
    "'foo' is regex('o+')", "'foo' is match('f')", "'foo' is search('o$')", "'2.1' is version('2.0', '>')",
    "'/' is abs", "'rel' is abs", "'/' is directory", "'/etc/hostname' is file", "'/nope' is exists",
    "{'failed': true} is failed", "{'failed': false} is success", "{'changed': true} is changed",
    "{'skipped': true} is skipped", "{'unreachable': true} is unreachable", "{} is reachable",
    "[3, 1] | ansible.builtin.unique", "[1, 2] is ansible.builtin.contains(2)",
]


@pytest.fixture(scope="module")
def ansible_render():
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar as AnsibleTemplar, trust_as_template
    templar = AnsibleTemplar(loader=DataLoader(), variables=VARS)

    def render(expr):
        try:
            return templar.template(trust_as_template("{{ " + expr + " }}"))
        except Exception as exc:                 # ansible's refusal is part of the answer
            return ("error", type(exc).__name__)
    return render


def _plain(value):
    return json.loads(json.dumps(value, default=str))


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_filter_or_test_as_ansible_core(expr, ansible_render):
    want = ansible_render(expr)
    try:
        got = Templar().render("{{ " + expr + " }}", dict(VARS))
    except TemplateError as exc:
        got = ("error", exc.msg)
    if isinstance(want, tuple) and want and want[0] == "error":
        assert isinstance(got, tuple) and got[0] == "error", f"ansible refuses {expr}, fleetops gives {got!r}"
        return
    assert _plain(got) == _plain(want)
