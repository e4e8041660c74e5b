"""The templar: renders values and evaluates conditions in the sandbox, lazily, and reads a
template's variables (undeclared, defined guards, sandbox escapes) before anything runs."""
from __future__ import annotations

import collections.abc
import re
import threading
import types
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2 import exceptions as jexc
from jinja2.meta import find_undeclared_variables
from jinja2.parser import Parser
from jinja2.sandbox import (UNSAFE_ASYNC_GENERATOR_ATTRIBUTES, UNSAFE_COROUTINE_ATTRIBUTES,
                            UNSAFE_GENERATOR_ATTRIBUTES, ImmutableSandboxedEnvironment)

from fleetops.engine.boolean import parse_bool
from fleetops.engine.templating.errors import TemplateError
from fleetops.engine.templating.filters import FILTERS, LOOKUPS, TESTS
from fleetops.engine.templating.lookup_calls import lookup_globals
from fleetops.engine.templating.unsafe import UnsafeText, mark_unsafe

# Names no playbook needs and every sandbox escape uses (`__class__`, `__globals__`, mangled
# `_TemplateReference__context`, frame attributes): refused before any host is contacted.
_INTERNAL_NAMES = frozenset(UNSAFE_GENERATOR_ATTRIBUTES | UNSAFE_COROUTINE_ATTRIBUTES
                            | UNSAFE_ASYNC_GENERATOR_ATTRIBUTES)
_FORMAT_FIELD_INTERNAL = re.compile(r"\{[^{}]*__")
_LOOKUP_CALLS = ("lookup", "query", "q")


class _Undefined(jinja2.StrictUndefined):
    """StrictUndefined that lets `x.y is defined` and `x.y | default(1)` work (as in Ansible).

    Attribute and item access chain to the same undefined; any real use
    (printing, comparing, iterating, truth) still fails with the first name.
    """

    __slots__ = ()

    def __getattr__(self, name):
        if name[:2] == "__":
            raise AttributeError(name)
        return self

    def __getitem__(self, key):
        return self


_TEMPLATE_MARKERS = ("{{", "{%", "{#")
_SINGLE_EXPR = re.compile(r"\A\{\{(.*)\}\}\Z", re.S)
_UNDEFINED_NAME = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)' is undefined")
# Not resolved lazily: big, and built by the executor from already-final data.
_NO_LAZY = {"hostvars", "groups", "group_names", "ansible_facts", "play_hosts",
            "ansible_play_hosts", "ansible_play_batch"}


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _needs_render(value: Any, depth: int = 0) -> bool:
    """True when a (trusted) value still holds a template somewhere."""
    if isinstance(value, UnsafeText) or depth > 200:
        return False
    if isinstance(value, str):
        return any(m in value for m in _TEMPLATE_MARKERS)
    if isinstance(value, dict):
        return any(_needs_render(v, depth + 1) for v in value.values()) or any(
            isinstance(k, str) and _needs_render(k, depth + 1) for k in value)
    if isinstance(value, (list, tuple)):
        return any(_needs_render(v, depth + 1) for v in value)
    return False


# ---------------------------------------------------------------- lazy variables

class _LazyVars(collections.abc.Mapping):
    """The variables one render sees; template-valued variables are rendered on first use."""

    def __init__(self, templar: "Templar", variables: dict):
        self._templar = templar
        self._vars = variables if variables is not None else {}
        self._cache: dict = {}
        self._busy: set = set()

    def __contains__(self, key) -> bool:
        return key in self._vars or key in self._templar.env.globals

    def __getitem__(self, key):
        if key in self._cache:
            return self._cache[key]
        if key not in self._vars:
            return self._templar.env.globals[key]
        raw = self._vars[key]
        if key in _NO_LAZY or not _needs_render(raw):
            self._cache[key] = raw
            return raw
        if key in self._busy:
            raise TemplateError(f"template error: variable '{key}' refers to itself")
        self._busy.add(key)
        try:
            value = self._templar._render(raw, self)
        except TemplateError as exc:
            # Stays undefined: `x | default(..)` and `x is defined` still work, use fails.
            value = self._templar.env.undefined(hint=f"{exc.msg} (in variable '{key}')", name=key)
        finally:
            self._busy.discard(key)
        self._cache[key] = value
        return value

    def __iter__(self):
        seen = set(self._vars)
        yield from self._vars
        yield from (k for k in self._templar.env.globals if k not in seen)

    def __len__(self) -> int:
        return len(set(self._vars) | set(self._templar.env.globals))


# ---------------------------------------------------------------- the templar

class Templar:
    """Renders values and evaluates conditions in the sandbox; safe to share between threads."""

    _CACHE_MAX = 4096

    def __init__(self):
        env = ImmutableSandboxedEnvironment(undefined=_Undefined, keep_trailing_newline=True,
                                            autoescape=False)
        env.filters.update(FILTERS)
        env.tests.update(TESTS)
        env.globals.update(lookup_globals(self))
        self.env = env
        self.lookups = LOOKUPS
        self._templates: dict = {}
        self._exprs: dict = {}
        self._single: dict = {}
        self._lock = threading.Lock()

    # -- helpers
    @staticmethod
    def is_template(value: Any) -> bool:
        """True for a (trusted) string containing Jinja2 markup."""
        return (isinstance(value, str) and not isinstance(value, UnsafeText)
                and any(m in value for m in _TEMPLATE_MARKERS))

    def _cached(self, cache: dict, key: str, build):
        hit = cache.get(key)
        if hit is None:
            hit = build()
            with self._lock:
                if len(cache) >= self._CACHE_MAX:
                    cache.clear()
                cache[key] = hit
        return hit

    def _single_expr(self, text: str) -> str | None:
        """The inner expression when `text` is exactly one `{{ expr }}`, else None."""
        def build():
            m = _SINGLE_EXPR.match(text)
            if not m:
                return ""
            try:
                body = self.env.parse(text).body
            except jexc.TemplateSyntaxError:
                return ""
            if (len(body) == 1 and isinstance(body[0], nodes.Output) and len(body[0].nodes) == 1
                    and not isinstance(body[0].nodes[0], nodes.TemplateData)):
                inner = m.group(1)
                if inner.startswith("-"):
                    inner = inner[1:]
                if inner.endswith("-"):
                    inner = inner[:-1]
                return inner
            return ""
        return self._cached(self._single, text, build) or None

    def _error(self, exc: BaseException, source: str) -> TemplateError:
        if isinstance(exc, TemplateError):
            return exc
        msg = _one_line(getattr(exc, "message", None) or str(exc) or type(exc).__name__)
        if isinstance(exc, jexc.SecurityError):
            return TemplateError(f"template error: refused by the sandbox: {msg}")
        if isinstance(exc, jexc.UndefinedError):
            m = _UNDEFINED_NAME.fullmatch(msg)
            if m:
                return TemplateError(f"undefined variable '{m.group(1)}'", variable=m.group(1))
            if msg.startswith(("undefined variable", "template error:")):
                return TemplateError(msg)
            return TemplateError(f"template error: {msg} in {_one_line(source, 80)!r}")
        if isinstance(exc, jexc.TemplateSyntaxError):
            return TemplateError(f"template error: syntax: {msg} in {_one_line(source, 80)!r}")
        if isinstance(exc, RecursionError):
            return TemplateError(f"template error: nested too deeply in {_one_line(source, 80)!r}")
        return TemplateError(f"template error: {type(exc).__name__}: {msg} in {_one_line(source, 80)!r}")

    def _finish(self, value: Any, mark: bool, depth: int = 0) -> Any:
        """Fail on any undefined inside a native result, materialise iterators, mark text unsafe."""
        if isinstance(value, jinja2.Undefined):
            value._fail_with_undefined_error()
        if depth > 200:
            return value
        if isinstance(value, str):
            return mark_unsafe(value) if mark else value
        if isinstance(value, (types.GeneratorType, collections.abc.Iterator, range,
                              collections.abc.KeysView, collections.abc.ValuesView)):
            value = list(value)
        if isinstance(value, dict):
            return {k: self._finish(v, mark, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._finish(v, mark, depth + 1) for v in value]
        return value

    def _run_expr(self, source: str, lazy: _LazyVars, mark: bool) -> Any:
        tmpl = self._cached(self._exprs, source,
                            lambda: self.env.compile_expression(source, undefined_to_none=False)._template)
        ctx = tmpl.new_context(lazy, shared=True)
        for _ in tmpl.root_render_func(ctx):
            pass
        return self._finish(ctx.vars["result"], mark)

    def _render_str(self, text: str, lazy: _LazyVars) -> Any:
        try:
            inner = self._single_expr(text)
            if inner is not None:
                return self._run_expr(inner, lazy, mark=True)
            tmpl = self._cached(self._templates, text, lambda: self.env.from_string(text))
            ctx = tmpl.new_context(lazy, shared=True)
            return UnsafeText("".join(str(x) for x in tmpl.root_render_func(ctx)))
        except Exception as exc:  # noqa: BLE001 - every template failure becomes one line
            raise self._error(exc, text) from None

    def _render(self, value: Any, lazy: _LazyVars) -> Any:
        if isinstance(value, UnsafeText):
            return value
        if isinstance(value, str):
            return self._render_str(value, lazy) if self.is_template(value) else value
        if not _needs_render(value):
            return value
        if isinstance(value, dict):
            return {(str(self._render_str(k, lazy)) if self.is_template(k) else k): self._render(v, lazy)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._render(v, lazy) for v in value]
        return value

    # -- public API
    def lazy(self, variables: dict) -> collections.abc.Mapping:
        """`variables` as one render sees them (template-valued ones rendered on first use)."""
        return _LazyVars(self, variables)

    def render(self, value: Any, variables: dict) -> Any:
        """Render strings inside `value` (recursively); `"{{ expr }}"` alone keeps its native type."""
        return self._render(value, _LazyVars(self, variables))

    def evaluate(self, expr: Any, variables: dict) -> Any:
        """Evaluate a bare conditional (`when`, `until`, `failed_when`, `changed_when`).

        bools/numbers pass through, None means "no condition" (True), a list is
        the AND of its items (bool), `"{{ expr }}"` is the same as `expr`.
        """
        if expr is None:
            return True
        if isinstance(expr, (bool, int, float)):
            return expr
        if isinstance(expr, (list, tuple)):
            lazy = _LazyVars(self, variables)
            return all(bool(self._evaluate(e, lazy)) for e in expr)
        return self._evaluate(expr, _LazyVars(self, variables))

    def _evaluate(self, expr: Any, lazy: _LazyVars) -> Any:
        if expr is None:
            return True
        if isinstance(expr, (bool, int, float)):
            return expr
        if not isinstance(expr, str):
            raise TemplateError(f"template error: a condition must be a string or a bool, "
                                f"got {type(expr).__name__}")
        text = expr.strip()
        source = self._single_expr(text)
        if source is None and self.is_template(text):
            rendered = str(self._render_str(text, lazy)).strip().lower()
            flag = False if rendered == "" else parse_bool(rendered)
            if flag is not None:
                return flag
            raise TemplateError(f"template error: condition {_one_line(expr, 80)!r} rendered to "
                                f"{_one_line(rendered, 40)!r}, not a boolean; write it without {{{{ }}}}")
        try:
            return self._run_expr(source if source is not None else text, lazy, mark=False)
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc, text) from None

    # -- static analysis (validation)
    def _asts(self, value: Any, conditional: bool):
        """Yield a parsed Template node for every template (or, if conditional, bare expression)."""
        if isinstance(value, UnsafeText):
            return
        if isinstance(value, str):
            text = value.strip() if conditional else value
            try:
                if self.is_template(text):
                    yield self.env.parse(text)
                elif conditional and text:
                    parser = Parser(self.env, text, state="variable")
                    expr = parser.parse_expression()
                    if not parser.stream.eos:
                        parser.fail("unexpected text after the expression")
                    tmpl = nodes.Template([nodes.Output([expr], lineno=1)], lineno=1)
                    tmpl.set_environment(self.env)
                    yield tmpl
            except jexc.TemplateSyntaxError as exc:
                raise self._error(exc, text) from None
        elif isinstance(value, dict):
            for k, v in value.items():
                yield from self._asts(k, False)
                yield from self._asts(v, conditional)
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from self._asts(v, conditional)

    @staticmethod
    def _subject_root(node):
        """The Name at the root of `a.b['c']`, with its parent, or (None, None)."""
        parent = None
        while isinstance(node, (nodes.Getattr, nodes.Getitem)):
            parent, node = node, node.node
        return (parent, node) if isinstance(node, nodes.Name) else (None, None)

    def undeclared(self, value: Any, conditional: bool = False) -> set[str]:
        """Top-level variables `value` needs, ignoring names only under `is defined` / `default`.

        `conditional=True` treats plain strings as bare expressions (`when:`).
        Raises TemplateError on a syntax error.
        """
        needed: set[str] = set()
        for tmpl in self._asts(value, conditional):
            self._check_names(tmpl)
            for node in list(tmpl.find_all((nodes.Test, nodes.Filter))):
                if ((isinstance(node, nodes.Test) and node.name in ("defined", "undefined"))
                        or (isinstance(node, nodes.Filter) and node.name in ("default", "d"))):
                    parent, root = self._subject_root(node.node)
                    if root is not None:
                        const = nodes.Const(None, lineno=root.lineno)
                        if parent is None:
                            node.node = const
                        else:
                            parent.node = const
            needed |= find_undeclared_variables(tmpl)
        return needed - set(self.env.globals)

    def _check_names(self, tmpl) -> None:
        """Refuse a filter, test or lookup that is not registered (jinja2 would only say so when
        compiling, with no file:line); a lookup named by a template is left to render time."""
        for node in tmpl.find_all((nodes.Filter, nodes.Test, nodes.Call)):
            if isinstance(node, nodes.Filter) and node.name not in self.env.filters:
                raise TemplateError(f"template error: unknown filter '{node.name}'")
            if isinstance(node, nodes.Test) and node.name not in self.env.tests:
                raise TemplateError(f"template error: unknown test '{node.name}'")
            if (isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name)
                    and node.node.name in _LOOKUP_CALLS and node.args and isinstance(node.args[0], nodes.Const)
                    and node.args[0].value not in self.lookups):
                raise TemplateError(f"template error: unknown lookup '{node.args[0].value}'")

    def check_names(self, value: Any, conditional: bool = False) -> None:
        """Raise TemplateError for the first unknown filter, test or lookup in `value`."""
        for tmpl in self._asts(value, conditional):
            self._check_names(tmpl)

    def check_sandbox(self, value: Any, conditional: bool = False) -> None:
        """Refuse, statically, templates that reach for Python internals (the sandbox would refuse
        them at render time too; validation refuses them before any host is contacted)."""
        for tmpl in self._asts(value, conditional):
            for node in tmpl.find_all((nodes.Getattr, nodes.Getitem, nodes.Filter, nodes.Const)):
                name = None
                if isinstance(node, nodes.Getattr):
                    name = node.attr
                elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
                    name = node.arg.value
                elif isinstance(node, nodes.Filter) and node.name == "attr" and node.args \
                        and isinstance(node.args[0], nodes.Const):
                    name = node.args[0].value
                elif isinstance(node, nodes.Const) and isinstance(node.value, str) \
                        and _FORMAT_FIELD_INTERNAL.search(node.value):
                    raise TemplateError(f"template error: refused by the sandbox: format string "
                                        f"{_one_line(node.value, 40)!r} reaches Python internals")
                if isinstance(name, str) and ("__" in name or name in _INTERNAL_NAMES):
                    raise TemplateError(f"template error: refused by the sandbox: {name!r} reaches "
                                        f"Python internals")

    def defined_guards(self, value: Any, conditional: bool = False) -> set[str]:
        """Names tested with `is defined` / `is undefined` anywhere in `value`.

        Validation treats them as possibly-defined (`when: x is defined` guarding `msg: "{{ x }}"`).
        """
        names: set[str] = set()
        for tmpl in self._asts(value, conditional):
            for node in tmpl.find_all(nodes.Test):
                if node.name in ("defined", "undefined"):
                    _, root = self._subject_root(node.node)
                    if root is not None:
                        names.add(root.name)
        return names
