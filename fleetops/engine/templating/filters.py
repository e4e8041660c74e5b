"""ansible-core's filter and test names (the ones playbooks use), for the sandboxed environment.

Each behaves as ansible-core's does on the same input; a misuse is a one-line TemplateError.
"""
from __future__ import annotations

import base64
import hashlib
import json
import posixpath
import re
import shlex

import jinja2
import yaml

from fleetops.engine.templating.errors import TemplateError


def _f_bool(value):
    """ansible-core's `bool` filter, its own word set (not the controller's rule in engine/boolean.py):
    yes/on/true/1 and no/off/false/0 in any case, an int by its text; anything else true only if == 1."""
    word = str(value).lower() if isinstance(value, (str, int)) else value
    if word in ("yes", "on", "true", "1"):
        return True
    if word in ("no", "off", "false", "0"):
        return False
    try:
        return bool(word == 1)
    except TypeError:
        return False


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
    # yamlsrc marks `!unsafe` values with this package's UnsafeText: imported when first used
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


def merge(a: dict, b: dict, recursive: bool, list_merge: str = "replace") -> dict:
    """ansible-core's combine of two mappings (also include_vars' hash_behaviour=merge)."""
    out = dict(a)
    for k, v in b.items():
        if recursive and isinstance(out.get(k), dict) and isinstance(v, dict):
            out[k] = merge(out[k], v, recursive, list_merge)
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
            result = merge(result, one, recursive, list_merge)
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
    """Compare dotted integer versions: `x is version('3.34', '>=')` (3.34 == 3.34.0). `strict` and
    `version_type` are accepted, as ansible-core's test takes them; the comparison stays this one."""
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
# the rest of ansible.builtin's set; every name also as ansible.builtin.<name>
from fleetops.engine.templating.filters_more import FILTERS_MORE, TESTS_MORE, prefixed  # noqa: E402

FILTERS = prefixed({**FILTERS_MORE, **FILTERS})
TESTS = prefixed({**TESTS_MORE, **TESTS})
# Lookup plugins by name (`lookup('name', ...)`, `query`/`q`): a name not here is refused by
# validation, as an unknown filter or test is. lookups_data adds its plugins to the same registry.
import fleetops.engine.templating.lookups_data  # noqa: E402,F401
from fleetops.engine.templating.lookups import LOOKUPS  # noqa: E402,F401  (the registry templar and withloop read)
LOOKUPS.update(prefixed(LOOKUPS))
