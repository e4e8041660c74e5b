"""Sandboxed Jinja2: native values, Ansible filters/tests, lazy variables, refusing escapes."""
from __future__ import annotations

import json

import pytest
import yaml

from fleetops.engine.templating import Templar, TemplateError, UnsafeText, mark_unsafe

T = Templar()
V = {
    "n": 3, "xs": [1, 2], "home": "/home/u", "db": "{{ home }}/.hermes/state.db",
    "r_ok": {"rc": 0, "failed": False, "changed": True},
    "r_bad": {"rc": 1, "failed": True, "changed": False, "skipped": False},
}


def err(value, variables=V, evaluate=False) -> str:
    with pytest.raises(TemplateError) as info:
        (T.evaluate if evaluate else T.render)(value, variables)
    assert "\n" not in info.value.msg
    return info.value.msg


# -- native rendering

@pytest.mark.parametrize("text, expected", [
    ("{{ xs }}", [1, 2]),
    ("{{ n + 1 }}", 4),
    ("{{ n > 2 }}", True),
    ("{{ {'a': n} }}", {"a": 3}),
    ("{{ range(3) }}", [0, 1, 2]),
    ("{{ xs | map('string') }}", ["1", "2"]),
    ("{{ none_var }}", None),
])
def test_single_expression_returns_native_value(text, expected):
    out = T.render(text, {**V, "none_var": None})
    assert out == expected and type(out) is type(expected)


def test_mixed_strings_render_to_str():
    assert T.render("n={{ n }}", V) == "n=3"
    assert T.render(" {{ n }}", V) == " 3"
    assert T.render("plain", V) == "plain"


def test_render_is_recursive_and_keeps_non_strings():
    value = {"a": ["{{ n }}", {"{{ 'k' }}": "{{ xs }}"}], "b": 5, "c": None}
    assert T.render(value, V) == {"a": [3, {"k": [1, 2]}], "b": 5, "c": None}


def test_variables_holding_templates_are_rendered_lazily():
    assert T.render("{{ db }}", V) == "/home/u/.hermes/state.db"
    assert T.render({"p": "{{ db }}"}, V) == {"p": "/home/u/.hermes/state.db"}


def test_output_is_never_rendered_again():
    out = T.render("{{ '{{ n }}' }}", V)
    assert out == "{{ n }}" and isinstance(out, UnsafeText)
    # a value produced by a render and stored as a variable stays data
    assert T.render("{{ v }}", {"v": out, "n": 3}) == "{{ n }}"


def test_unsafe_host_output_is_not_a_template():
    result = mark_unsafe({"stdout": "{{ secret }}", "lines": ["{{ secret }}"]})
    out = T.render("{{ r.stdout }} {{ r.lines[0] }}", {"r": result, "secret": "pw"})
    assert out == "{{ secret }} {{ secret }}"


def test_self_referencing_variables_give_one_line_error():
    msg = err("{{ a }}", {"a": "{{ b }}", "b": "{{ a }}"})
    assert "refers to itself" in msg


def test_variable_with_undefined_inside_still_allows_default():
    variables = {"a": "{{ nothing_here }}"}
    assert T.render("{{ a | default('fb') }}", variables) == "fb"
    assert err("{{ a }}", variables).startswith("undefined variable 'nothing_here'")


def test_unsafe_text_dumps_as_plain_yaml_and_json():
    value = mark_unsafe({"a": "x"})
    assert yaml.safe_dump(value) == "a: x\n"
    assert json.dumps(value) == '{"a": "x"}'


# -- errors

def test_undefined_variable_message():
    assert err("{{ missing }}") == "undefined variable 'missing'"
    assert err("x {{ missing }} y") == "undefined variable 'missing'"
    assert err("{{ [missing] }}") == "undefined variable 'missing'"
    assert err("{{ missing.attr }}") == "undefined variable 'missing'"


def test_missing_attribute_message():
    msg = err("{{ r_ok.nope }}")
    assert msg.startswith("template error: ") and "nope" in msg


def test_syntax_error_is_one_line():
    msg = err("{{ n +\n }")
    assert msg.startswith("template error: syntax")


def test_filter_exception_is_template_error():
    assert err("{{ 'x' | from_json }}").startswith("template error: JSONDecodeError")


@pytest.mark.parametrize("text", [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ cycler.__init__.__globals__.os.system('id') }}",
    "{{ lipsum.__globals__['os'] }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ ().__class__.__base__.__subclasses__() }}",
    "{{ 'a' | attr('__class__') }}",
    "{{ '{0.__class__}'.format('') }}",
    "{% for c in ''.__class__.__mro__ %}{{ c }}{% endfor %}",
    "{{ self.__init__ }}",
    "{{ xs.append(3) }}",
])
def test_sandbox_refuses_python_internals(text):
    msg = err(text)
    assert "sandbox" in msg or "undefined" in msg
    assert V["xs"] == [1, 2]


def test_sandbox_refuses_in_conditions_too():
    assert "sandbox" in err("''.__class__.__mro__", evaluate=True)


# -- conditions

def test_evaluate_bare_and_wrapped_expressions():
    assert T.evaluate("n > 2", V) is True
    assert T.evaluate("{{ n > 5 }}", V) is False
    assert T.evaluate(True, V) is True and T.evaluate(False, V) is False
    assert T.evaluate(["n > 2", "xs | length == 2"], V) is True
    assert T.evaluate(["n > 2", "xs | length == 3"], V) is False
    assert T.evaluate("missing is defined", V) is False
    assert T.evaluate("missing.x.y is undefined", V) is True


def test_evaluate_undefined_fails():
    assert err("missing", evaluate=True) == "undefined variable 'missing'"
    assert err("missing > 1", evaluate=True) == "undefined variable 'missing'"


def test_evaluate_refuses_rendered_expression_text():
    msg = err("{{ n }} == 3", evaluate=True)
    assert "not a boolean" in msg


# -- filters

@pytest.mark.parametrize("text, expected", [
    ("{{ missing | default('d') }}", "d"),
    ("{{ missing | d(7) }}", 7),
    ("{{ 'yes' | bool }}", True), ("{{ 'off' | bool }}", False),
    ("{{ '5' | int + 1 }}", 6), ("{{ '1.5' | float }}", 1.5), ("{{ 5 | string }}", "5"),
    ("{{ 'Ab' | lower }}{{ 'Ab' | upper }}", "abAB"),
    ("{{ {'a': 1} | to_json }}", '{"a": 1}'),
    ("{{ {'b': 1, 'a': 2} | to_nice_json }}", '{\n    "a": 2,\n    "b": 1\n}'),
    ("{{ '{\"a\": [1]}' | from_json }}", {"a": [1]}),
    ("{{ {'a': 1} | to_yaml }}", "a: 1\n"),
    ("{{ 'a: [1, 2]' | from_yaml }}", {"a": [1, 2]}),
    ("{{ 'hé' | b64encode }}", "aMOp"), ("{{ 'aMOp' | b64decode }}", "hé"),
    ("{{ '/a/b/c.db' | basename }}|{{ '/a/b/c.db' | dirname }}", "c.db|/a/b"),
    ("{{ \"it's; rm -rf /\" | quote }}", "'it'\"'\"'s; rm -rf /'"),
    ("{{ 'SQLite 3.45.1' | regex_search('[0-9.]+') }}", "3.45.1"),
    ("{{ 'v3.45' | regex_search('v(\\\\d+)\\\\.(\\\\d+)', '\\\\2') }}", ["45"]),
    ("{{ 'nothing' | regex_search('\\\\d') }}", None),
    ("{{ 'a-b-c' | regex_replace('-', '_') }}", "a_b_c"),
    ("{{ {'a': 1, 'n': {'x': 1}} | combine({'n': {'y': 2}}, recursive=true) }}",
     {"a": 1, "n": {"x": 1, "y": 2}}),
    ("{{ {'a': 1} | combine({'a': 2}) }}", {"a": 2}),
    ("{{ {'a': 1} | dict2items }}", [{"key": "a", "value": 1}]),
    ("{{ [{'key': 'a', 'value': 1}] | items2dict }}", {"a": 1}),
    ("{{ n | mandatory }}", 3),
    ("{{ xs | join(',') }}", "1,2"), ("{{ xs | length }}", 2),
    ("{{ [1, 1, 2] | unique }}", [1, 2]),
    ("{{ [1, [2, [3]]] | flatten }}", [1, 2, 3]), ("{{ [1, [2, [3]]] | flatten(1) }}", [1, 2, [3]]),
    ("{{ (n > 2) | ternary('big', 'small') }}", "big"),
    ("{{ 'abc' | hash('sha256') }}", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    ("{{ 1024 | human_readable }}", "1.00 KB"), ("{{ 500 | human_readable }}", "500.00 Bytes"),
    ("{{ 1572864 | human_readable }}", "1.50 MB"),
])
def test_filters(text, expected):
    assert T.render(text, V) == expected


def test_mandatory_names_the_variable():
    assert "mandatory variable 'missing'" in err("{{ missing | mandatory }}")


# -- tests

@pytest.mark.parametrize("expr, expected", [
    ("r_bad is failed", True), ("r_ok is failed", False),
    ("r_ok is changed", True), ("r_ok is succeeded", True), ("r_bad is success", False),
    ("r_bad is skipped", False),
    ("'3.34.1' is version('3.34', '>=')", True), ("'3.9' is version('3.34', '>=')", False),
    ("'3.34' is version('3.34.0', '==')", True), ("'3.45.1' is version('3.45', 'gt')", True),
    ("'hermes-1' is match('hermes')", True), ("'a hermes' is match('hermes')", False),
    ("'a hermes' is search('herm')", True),
    ("'x' is string", True), ("3 is number", True), ("{} is mapping", True), ("xs is sequence", True),
    ("missing is undefined", True), ("n is defined", True),
])
def test_tests(expr, expected):
    assert T.evaluate(expr, V) is expected


# -- static analysis

def test_is_template():
    assert T.is_template("a {{ b }}") and T.is_template("{% if x %}{% endif %}")
    assert not T.is_template("plain") and not T.is_template(3)
    assert not T.is_template(UnsafeText("{{ x }}"))


def test_undeclared_basic_and_nested():
    assert T.undeclared({"a": ["{{ x }}", "{{ y.z }}"], "{{ k }}": 1}) == {"x", "y", "k"}
    assert T.undeclared("plain") == set() and T.undeclared(5) == set()


def test_undeclared_excludes_defined_and_default_guards():
    assert T.undeclared("{{ a | default(1) }} {{ b.c | d(2) }} {{ e is defined }}") == set()
    assert T.undeclared("{{ a | default(fallback) }}") == {"fallback"}
    assert T.undeclared("{{ x[key] is defined }}") == {"key"}
    # used both guarded and unguarded: still needed
    assert T.undeclared("{{ x is defined }} {{ x }}") == {"x"}


def test_undeclared_excludes_set_and_loop_names_and_globals():
    text = "{% set s = 1 %}{{ s }}{% for i in items %}{{ i }}{{ loop.index }}{% endfor %}{{ range(2) }}"
    assert T.undeclared(text) == {"items"}


def test_undeclared_conditional_mode():
    assert T.undeclared("x > 1 and y is defined", conditional=True) == {"x"}
    assert T.undeclared(["a", True, "{{ b }}"], conditional=True) == {"a", "b"}
    assert T.undeclared("x > 1") == set()  # not a template unless conditional


def test_undeclared_syntax_error():
    with pytest.raises(TemplateError) as info:
        T.undeclared("{{ x +  }}")
    assert info.value.msg.startswith("template error: syntax")
    with pytest.raises(TemplateError):
        T.undeclared("x y", conditional=True)


def test_defined_guards():
    assert T.defined_guards("a is defined and b.c is undefined", conditional=True) == {"a", "b"}
    assert T.defined_guards("{% if z is defined %}{{ z }}{% endif %}") == {"z"}


def test_what_is_not_registered_is_refused_and_what_is_registered_is_read():
    """The refusal follows the registries (env.filters, env.tests, templar.lookups), not a list:
    a name added to one is read, the same name missing is a one-line TemplateError."""
    t = Templar()
    texts = {"filter": "{{ [1] | fo_extra }}", "test": "{{ 1 is fo_extra }}",
             "lookup": "{{ lookup('fo_extra', 'a') }} {{ q('fo_extra') }} {{ query('fo_extra') }}"}
    for kind, text in texts.items():
        with pytest.raises(TemplateError) as info:
            t.undeclared(text)
        assert info.value.msg == f"template error: unknown {kind} 'fo_extra'"
    with pytest.raises(TemplateError, match="unknown test 'fo_extra'"):
        t.check_names("x is fo_extra", conditional=True)
    t.env.filters["fo_extra"] = t.env.tests["fo_extra"] = lambda *a: True
    t.lookups = {"fo_extra": lambda *a: []}
    assert t.undeclared(texts["filter"]) == set() and t.undeclared(texts["test"]) == set()
    assert t.undeclared(texts["lookup"]) == set()   # lookup, q and query are the templar's globals
    assert t.undeclared("{{ lookup(which, 'a') }}") == {"which"}   # a templated plugin name: render time
