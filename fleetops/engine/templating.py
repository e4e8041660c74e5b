"""Sandboxed Jinja2 for task arguments and conditions, with Ansible's filter and test names.

Why a sandbox: playbooks, inventories and (worse) host output flow into
templates; a template must never reach Python internals (`__class__`,
`__globals__`, `__subclasses__`), so everything runs in Jinja2's
ImmutableSandboxedEnvironment with StrictUndefined.

Variables are lazy, as in Ansible: a variable whose value is itself a template
(`db: "{{ ansible_user_dir }}/.hermes/state.db"`) is rendered when it is used.
Everything a render produces, and everything wrapped with `mark_unsafe` (the
executor wraps registered results and gathered facts), is `UnsafeText` and is
never rendered again, so text coming from a host cannot smuggle in a template.
"""
from __future__ import annotations

import base64
import collections.abc
import hashlib
import json
import posixpath
import re
import shlex
import threading
import types
from typing import Any

import jinja2
import yaml
from jinja2 import nodes
from jinja2 import exceptions as jexc
from jinja2.meta import find_undeclared_variables
from jinja2.parser import Parser
from jinja2.sandbox import (UNSAFE_ASYNC_GENERATOR_ATTRIBUTES, UNSAFE_COROUTINE_ATTRIBUTES,
                            UNSAFE_GENERATOR_ATTRIBUTES, ImmutableSandboxedEnvironment)

# Names no playbook needs and every sandbox escape uses (`__class__`, `__globals__`, mangled
# `_TemplateReference__context`, frame attributes): refused before any host is contacted.
_INTERNAL_NAMES = frozenset(UNSAFE_GENERATOR_ATTRIBUTES | UNSAFE_COROUTINE_ATTRIBUTES
                            | UNSAFE_ASYNC_GENERATOR_ATTRIBUTES)
_FORMAT_FIELD_INTERNAL = re.compile(r"\{[^{}]*__")


class TemplateError(Exception):
    """One-line template problem: "undefined variable 'x'" or "template error: ...".

    `variable` names the undefined top-level variable when that is the problem.
    """

    def __init__(self, msg: str, variable: str | None = None):
        super().__init__(msg)
        self.msg = msg
        self.variable = variable


class UnsafeText(str):
    """Text that is data, never a template (rendered output, host output, facts)."""

    __slots__ = ()

    def __reduce__(self):
        return UnsafeText, (str(self),)


def mark_unsafe(value: Any) -> Any:
    """Return `value` with every string turned into UnsafeText (containers are copied)."""
    if isinstance(value, UnsafeText):
        return value
    if isinstance(value, str):
        return UnsafeText(value)
    if isinstance(value, dict):
        return {k: mark_unsafe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [mark_unsafe(v) for v in value]
    return value


# Let yaml.safe_dump (and the to_yaml filter) write UnsafeText like any str.
yaml.SafeDumper.add_representer(UnsafeText, yaml.SafeDumper.represent_str)
if hasattr(yaml, "CSafeDumper"):
    yaml.CSafeDumper.add_representer(UnsafeText, yaml.CSafeDumper.represent_str)


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
_TRUE_STRINGS = {"true", "yes", "on", "1", "y"}
_FALSE_STRINGS = {"false", "no", "off", "0", "n", ""}
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


# ---------------------------------------------------------------- filters and tests

def _f_bool(value):
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)):
        return value == 1
    return str(value).strip().lower() in ("yes", "on", "1", "true", "y")


def _f_to_json(value, **kw):
    return json.dumps(value, **kw)


def _f_to_nice_json(value, indent=4, sort_keys=True, **kw):
    return json.dumps(value, indent=indent, sort_keys=sort_keys, separators=(",", ": "), **kw)


def _f_from_json(value):
    return json.loads(str(value))


def _f_to_yaml(value, **kw):
    kw.setdefault("allow_unicode", True)
    kw.setdefault("default_flow_style", False)
    kw.setdefault("sort_keys", False)
    return yaml.safe_dump(value, **kw)


def _f_from_yaml(value):
    from fleetops.engine.yamlsrc import load_yaml_text
    from fleetops.errors import BadInput
    try:
        return load_yaml_text(str(value), "<from_yaml>")
    except BadInput as exc:
        raise TemplateError(f"template error: from_yaml: {exc}") from None


def _f_b64encode(value, encoding="utf-8"):
    data = value if isinstance(value, bytes) else str(value).encode(encoding)
    return base64.b64encode(data).decode("ascii")


def _f_b64decode(value, encoding="utf-8"):
    return base64.b64decode(str(value)).decode(encoding)


def _f_quote(value):
    return shlex.quote("" if value is None else str(value))


def _re_flags(ignorecase=False, multiline=False):
    return (re.I if ignorecase else 0) | (re.M if multiline else 0)


def _f_regex_search(value, regex, *groups, ignorecase=False, multiline=False):
    match = re.search(regex, str(value), _re_flags(ignorecase, multiline))
    if not match:
        return None
    if not groups:
        return match.group(0)
    out = []
    for g in groups:
        if g.startswith("\\g<") and g.endswith(">"):
            out.append(match.group(g[3:-1]))
        elif g.startswith("\\"):
            out.append(match.group(int(g[1:])))
        else:
            raise TemplateError(f"template error: regex_search: unknown group {g!r}")
    return out


def _f_regex_replace(value, pattern="", replacement="", ignorecase=False, multiline=False, count=0):
    return re.sub(pattern, replacement, str(value), count=count, flags=_re_flags(ignorecase, multiline))


def _merge(a: dict, b: dict, recursive: bool, list_merge: str) -> dict:
    out = dict(a)
    for k, v in b.items():
        if recursive and isinstance(out.get(k), dict) and isinstance(v, dict):
            out[k] = _merge(out[k], v, recursive, list_merge)
        elif list_merge != "replace" and isinstance(out.get(k), list) and isinstance(v, list):
            old = out[k]
            if list_merge == "append":
                out[k] = old + v
            elif list_merge == "prepend":
                out[k] = v + old
            elif list_merge == "append_rp":
                out[k] = [x for x in old if x not in v] + v
            elif list_merge == "prepend_rp":
                out[k] = v + [x for x in old if x not in v]
            elif list_merge == "keep":
                out[k] = old
            else:
                raise TemplateError(f"template error: combine: unknown list_merge {list_merge!r}")
        else:
            out[k] = v
    return out


def _f_combine(*dicts, recursive=False, list_merge="replace"):
    result: dict = {}
    for d in dicts:
        for one in (d if isinstance(d, list) else [d]):
            if not isinstance(one, dict):
                raise TemplateError(f"template error: combine expects mappings, got {type(one).__name__}")
            result = _merge(result, one, recursive, list_merge)
    return result


def _f_dict2items(value, key_name="key", value_name="value"):
    if not isinstance(value, dict):
        raise TemplateError(f"template error: dict2items expects a mapping, got {type(value).__name__}")
    return [{key_name: k, value_name: v} for k, v in value.items()]


def _f_items2dict(value, key_name="key", value_name="value"):
    try:
        return {item[key_name]: item[value_name] for item in value}
    except (KeyError, TypeError) as exc:
        raise TemplateError(f"template error: items2dict: each item needs '{key_name}' "
                            f"and '{value_name}' ({exc})") from None


def _f_mandatory(value, msg=None):
    if isinstance(value, jinja2.Undefined):
        name = getattr(value, "_undefined_name", None)
        raise TemplateError(msg or (f"mandatory variable '{name}' is not defined" if name
                                    else "mandatory variable is not defined"), variable=name)
    return value


def _f_flatten(value, levels=None, skip_nulls=True):
    def walk(items, depth):
        for x in items:
            if skip_nulls and x in (None, "None"):
                continue
            if isinstance(x, (list, tuple)) and (levels is None or depth < levels):
                yield from walk(x, depth + 1)
            else:
                yield x
    return list(walk(value, 0))


def _f_ternary(value, true_val, false_val, none_val=None):
    if value is None and none_val is not None:
        return none_val
    return true_val if value else false_val


_HASHES = {"md5", "sha1", "sha224", "sha256", "sha384", "sha512", "blake2b", "blake2s"}


def _f_hash(value, hashtype="sha1"):
    if hashtype not in _HASHES:
        raise TemplateError(f"template error: hash: unknown algorithm {hashtype!r}")
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return hashlib.new(hashtype, data).hexdigest()


_SIZES = [("Y", 1 << 80), ("Z", 1 << 70), ("E", 1 << 60), ("P", 1 << 50), ("T", 1 << 40),
          ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10), ("B", 1)]


def _f_human_readable(size, isbits=False, unit=None):
    """Ansible's bytes_to_human: 1024 -> '1.00 KB', 500 -> '500.00 Bytes'."""
    size = float(size)
    base = "bits" if isbits else "Bytes"
    suffix, limit = "B", 1
    for suffix, limit in _SIZES:
        if (unit is None and abs(size) >= limit) or (unit is not None and unit.upper()[:1] == suffix):
            break
    label = suffix + base[0] if limit != 1 else base
    return "%.2f %s" % (size / limit, label)


def _t_result(value, name):
    if not isinstance(value, dict):
        raise TemplateError(f"template error: the '{name}' test expects a task result, "
                            f"got {type(value).__name__}")
    return value


def _t_failed(value):
    return bool(_t_result(value, "failed").get("failed", False))


def _t_changed(value):
    return bool(_t_result(value, "changed").get("changed", False))


def _t_succeeded(value):
    return not bool(_t_result(value, "succeeded").get("failed", False))


def _t_skipped(value):
    return bool(_t_result(value, "skipped").get("skipped", False))


def _version_tuple(v) -> tuple:
    parts = []
    for piece in re.split(r"[.\-+]", str(v).strip().lstrip("vV")):
        m = re.match(r"\d+", piece)
        parts.append(int(m.group(0)) if m else 0)
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


_VERSION_OPS = {
    "<": lambda a, b: a < b, "lt": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, "le": lambda a, b: a <= b,
    ">": lambda a, b: a > b, "gt": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "ge": lambda a, b: a >= b,
    "==": lambda a, b: a == b, "=": lambda a, b: a == b, "eq": lambda a, b: a == b,
    "!=": lambda a, b: a != b, "<>": lambda a, b: a != b, "ne": lambda a, b: a != b,
}


def _t_version(value, version, operator="eq", strict=None, version_type=None):
    """Compare dotted integer versions: `x is version('3.34', '>=')` (3.34 == 3.34.0)."""
    if operator not in _VERSION_OPS:
        raise TemplateError(f"template error: version: unknown operator {operator!r}")
    return _VERSION_OPS[operator](_version_tuple(value), _version_tuple(version))


def _t_match(value, pattern, ignorecase=False, multiline=False):
    return re.match(pattern, str(value), _re_flags(ignorecase, multiline)) is not None


def _t_search(value, pattern, ignorecase=False, multiline=False):
    return re.search(pattern, str(value), _re_flags(ignorecase, multiline)) is not None


FILTERS = {
    "bool": _f_bool, "to_json": _f_to_json, "to_nice_json": _f_to_nice_json,
    "from_json": _f_from_json, "to_yaml": _f_to_yaml, "to_nice_yaml": _f_to_yaml,
    "from_yaml": _f_from_yaml, "b64encode": _f_b64encode, "b64decode": _f_b64decode,
    "basename": posixpath.basename, "dirname": posixpath.dirname, "quote": _f_quote,
    "regex_search": _f_regex_search, "regex_replace": _f_regex_replace, "combine": _f_combine,
    "dict2items": _f_dict2items, "items2dict": _f_items2dict, "mandatory": _f_mandatory,
    "flatten": _f_flatten, "ternary": _f_ternary, "hash": _f_hash,
    "human_readable": _f_human_readable,
}
TESTS = {
    "failed": _t_failed, "changed": _t_changed, "succeeded": _t_succeeded, "success": _t_succeeded,
    "skipped": _t_skipped, "version": _t_version, "version_compare": _t_version,
    "match": _t_match, "search": _t_search,
}


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
        self.env = env
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
            if rendered in _TRUE_STRINGS:
                return True
            if rendered in _FALSE_STRINGS:
                return False
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
