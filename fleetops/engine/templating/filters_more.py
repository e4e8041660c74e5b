"""The rest of ansible.builtin's filters and tests (set theory, math, paths, URLs, encodings,
file tests), each behaving as ansible-core's on the same input; and every name also under its
`ansible.builtin.` prefix, as ansible-core resolves it."""
from __future__ import annotations

import datetime
import glob
import itertools
import math
import ntpath
import os
import posixpath
import random
import re
import uuid
from urllib.parse import unquote, unquote_plus, urlsplit

import jinja2

from fleetops.engine.boolean import parse_bool
from fleetops.engine.templating.errors import TemplateError

_UUID_NAMESPACE_ANSIBLE = uuid.UUID("361E6D51-FAEC-444A-9079-341386DA8E2E")


def _hashable_unique(seq):
    out = []
    for x in seq:
        if x not in out:
            out.append(x)
    return out


def _unique(value, case_sensitive=None, attribute=None):
    if attribute is not None or case_sensitive is not None:
        seen, out = [], []
        for x in value:
            key = x[attribute] if attribute is not None else x
            if isinstance(key, str) and case_sensitive is False:
                key = key.lower()
            if key not in seen:
                seen.append(key)
                out.append(x)
        return out
    return _hashable_unique(value)


def _intersect(a, b):
    return _hashable_unique([x for x in a if x in b])


def _difference(a, b):
    return _hashable_unique([x for x in a if x not in b])


def _symmetric_difference(a, b):
    inter = _intersect(a, b)
    return [x for x in _hashable_unique(list(a) + list(b)) if x not in inter]


def _union(a, b):
    return _hashable_unique(list(a) + list(b))


def _log(x, base=math.e):
    try:
        return math.log10(x) if base == 10 else math.log(x, base)
    except TypeError as exc:
        raise TemplateError(f"template error: log() can only be used on numbers: {exc}") from None


def _pow(x, y):
    try:
        return math.pow(x, y)
    except TypeError as exc:
        raise TemplateError(f"template error: pow() can only be used on numbers: {exc}") from None


def _root(x, base=2):
    try:
        return math.sqrt(x) if base == 2 else math.pow(x, 1.0 / float(base))
    except TypeError as exc:
        raise TemplateError(f"template error: root() can only be used on numbers: {exc}") from None


_BYTES = {"Y": 80, "Z": 70, "E": 60, "P": 50, "T": 40, "G": 30, "M": 20, "K": 10, "B": 0}


def _human_to_bytes(size, default_unit=None, isbits=False):
    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(size))
    if not m:
        raise TemplateError(f"template error: human_to_bytes() can't interpret {size!r}")
    num, unit = float(m.group(1)), m.group(2) or default_unit or "B"
    key = unit[0].upper()
    if key not in _BYTES:
        raise TemplateError(f"template error: human_to_bytes() failed to convert {size}: unknown unit {unit!r}")
    return int(round(num * (1 << _BYTES[key])))


def _min(value, attribute=None, case_sensitive=False):
    return jinja2.filters.do_min(jinja2.Environment(), value, case_sensitive=case_sensitive, attribute=attribute)


def _max(value, attribute=None, case_sensitive=False):
    return jinja2.filters.do_max(jinja2.Environment(), value, case_sensitive=case_sensitive, attribute=attribute)


def _path_join(paths):
    if isinstance(paths, str):
        return posixpath.join(paths)
    return posixpath.join(*paths)


def _splitext(p):
    return list(posixpath.splitext(p))


def _urldecode(value):
    return unquote_plus(str(value))


_URL_PARTS = ("fragment", "hostname", "netloc", "password", "path", "port", "query", "scheme", "username")


def _urlsplit(value, query=""):
    parts = urlsplit(str(value))
    results = {k: getattr(parts, k) for k in _URL_PARTS}
    if query:
        if query not in results:
            raise TemplateError(f"template error: urlsplit: unknown URL component: {query}")
        return results[query]
    return results


def _regex_findall(value, regex, multiline=False, ignorecase=False):
    flags = (re.I if ignorecase else 0) | (re.M if multiline else 0)
    return re.findall(regex, str(value), flags)


def _regex_escape(value, re_type="python"):
    if re_type == "python":
        return re.escape(str(value))
    if re_type == "posix_basic":
        return re.sub(r"([].[^$*\\])", r"\\\1", str(value))
    raise TemplateError(f"template error: Invalid regex type ({re_type})")


def _split(value, sep=None, maxsplit=-1):
    return str(value).split(sep, maxsplit)


def _to_uuid(value, namespace=_UUID_NAMESPACE_ANSIBLE):
    ns = namespace if isinstance(namespace, uuid.UUID) else uuid.UUID(str(namespace))
    return str(uuid.uuid5(ns, str(value)))


def _type_debug(value):
    return type(value).__name__


def _extract(item, container, morekeys=None):
    value = container[item]
    for key in ([] if morekeys is None else (morekeys if isinstance(morekeys, list) else [morekeys])):
        value = value[key]
    return value


def _zip(*args):
    return [list(x) for x in zip(*args)]


def _zip_longest(*args, fillvalue=None):
    return [list(x) for x in itertools.zip_longest(*args, fillvalue=fillvalue)]


def _permutations(value, r=None):
    return [list(x) for x in itertools.permutations(value, r)]


def _combinations(value, r):
    return [list(x) for x in itertools.combinations(value, r)]


def _product(*args, repeat=1):
    return [list(x) for x in itertools.product(*args, repeat=repeat)]


def _rekey_on_member(data, key, duplicates="error"):
    if duplicates not in ("error", "overwrite"):
        raise TemplateError(f"template error: duplicates parameter to rekey_on_member has unknown value: {duplicates}")
    items = data.values() if isinstance(data, dict) else data
    out: dict = {}
    for item in items:
        if not isinstance(item, dict) or key not in item:
            raise TemplateError(f"template error: rekey_on_member: key {key} was not found in {item!r}")
        if item[key] in out and duplicates == "error":
            raise TemplateError(f"template error: rekey_on_member: Key {item[key]} is not unique, cannot correctly turn into dict")
        out[item[key]] = item
    return out


def _subelements(obj, subelements, skip_missing=False):
    from fleetops.engine.templating.lookups import LookupError_, subelements_lookup as sub
    try:
        return sub([obj, subelements, {"skip_missing": skip_missing}], None, _pop=False)
    except LookupError_ as exc:
        raise TemplateError(f"template error: subelements: {exc.msg}") from None


def _random(end, start=None, step=None, seed=None):
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    if isinstance(end, int):
        return rng.randrange(start or 0, end, step or 1)
    if hasattr(end, "__iter__"):
        if start is not None or step is not None:
            raise TemplateError("template error: start and step can only be used with integer values")
        return rng.choice(list(end))
    raise TemplateError("template error: random can only be used on sequences and integers")


def _shuffle(value, seed=None):
    items = list(value)
    (random.Random(seed) if seed is not None else random.SystemRandom()).shuffle(items)
    return items


def _strftime(fmt, second=None, utc=False):
    t = datetime.datetime.fromtimestamp(second if second is not None else datetime.datetime.now().timestamp(),
                                        tz=datetime.timezone.utc if utc else None)
    return t.strftime(fmt)


def _to_datetime(value, fmt="%Y-%m-%d %H:%M:%S"):
    return datetime.datetime.strptime(str(value), fmt)


def _comment(text, style="plain", decoration=None, prefix=None, postfix=None, beginning=None, end=None,
             newline="\n", prefix_count=1):
    styles = {"plain": ("", "# ", ""), "erlang": ("", "% ", ""), "c": ("", "// ", ""),
              "cblock": ("/*", " * ", " */"), "xml": ("<!--", " - ", "-->")}
    b, d, e = styles.get(style, styles["plain"])
    b, d, e = beginning if beginning is not None else b, decoration if decoration is not None else d, \
        end if end is not None else e
    pre = prefix if prefix is not None else (d.rstrip() + newline if not b else newline)
    post = postfix if postfix is not None else (newline + d.rstrip() if not e else newline)
    lines = [d + x if x else d.rstrip() for x in str(text).split(newline)]
    body = (pre * prefix_count if prefix_count else "") + newline.join(lines) + post
    return (b + newline if b else "") + body + (newline + e if e else "")


FILTERS_MORE = {
    "unique": _unique, "intersect": _intersect, "difference": _difference,
    "symmetric_difference": _symmetric_difference, "union": _union, "log": _log, "pow": _pow,
    "root": _root, "human_to_bytes": _human_to_bytes, "min": _min, "max": _max,
    "path_join": _path_join, "splitext": _splitext, "expanduser": os.path.expanduser,
    "expandvars": os.path.expandvars, "realpath": os.path.realpath,
    "relpath": lambda p, start=os.curdir: os.path.relpath(p, start),
    "win_basename": lambda p: ntpath.basename(p), "win_dirname": lambda p: ntpath.dirname(p),
    "win_splitdrive": lambda p: list(ntpath.splitdrive(p)),
    "fileglob": lambda pattern: [g for g in glob.glob(pattern) if os.path.isfile(g)],
    "urldecode": _urldecode, "urlsplit": _urlsplit, "regex_findall": _regex_findall,
    "regex_escape": _regex_escape, "split": _split, "to_uuid": _to_uuid, "type_debug": _type_debug,
    "extract": _extract, "zip": _zip, "zip_longest": _zip_longest, "permutations": _permutations,
    "combinations": _combinations, "product": _product, "rekey_on_member": _rekey_on_member,
    "subelements": _subelements, "random": _random, "shuffle": _shuffle, "strftime": _strftime,
    "to_datetime": _to_datetime, "comment": _comment,
    "md5": lambda v: __import__("hashlib").md5(str(v).encode()).hexdigest(),
    "sha1": lambda v: __import__("hashlib").sha1(str(v).encode()).hexdigest(),
    "checksum": lambda v: __import__("hashlib").sha1(str(v).encode()).hexdigest(),
    "from_yaml_all": lambda v: list(__import__("yaml").safe_load_all(str(v))),
    "unquote": lambda v: unquote(str(v)),
}


def _contains(seq, value):
    return value in seq


def _subset(a, b):
    return set(a) <= set(b)


def _superset(a, b):
    return set(a) >= set(b)


def _truthy(value, convert_bool=False):
    if convert_bool and isinstance(value, (str, int, bool)):
        parsed = parse_bool(value)          # ansible-core: a word that is no boolean stays as it is
        value = value if parsed is None else parsed
    return bool(value)


def _is_uri(value, schemes=None):
    try:
        parts = urlsplit(str(value))
    except ValueError:
        return False
    return bool(parts.scheme) and (schemes is None or parts.scheme in schemes)


def _is_url(value, schemes=None):
    try:
        parts = urlsplit(str(value))
    except ValueError:
        return False
    return bool(parts.scheme and parts.netloc) and (schemes is None or parts.scheme in schemes)


TESTS_MORE = {
    "contains": _contains, "subset": _subset, "issubset": _subset, "superset": _superset,
    "issuperset": _superset, "truthy": _truthy,
    "falsy": lambda v, convert_bool=False: not _truthy(v, convert_bool),
    "nan": lambda v: isinstance(v, float) and math.isnan(v), "isnan": lambda v: isinstance(v, float) and math.isnan(v),
    "directory": os.path.isdir, "is_dir": os.path.isdir, "file": os.path.isfile, "is_file": os.path.isfile,
    "link": os.path.islink, "is_link": os.path.islink, "exists": os.path.exists,
    "link_exists": os.path.lexists, "abs": os.path.isabs, "is_abs": os.path.isabs,
    "same_file": os.path.samefile, "is_same_file": os.path.samefile, "mount": os.path.ismount,
    "is_mount": os.path.ismount, "regex": lambda v, pattern, ignorecase=False, multiline=False,
    match_type="search": bool(getattr(re, match_type)(pattern, str(v), (re.I if ignorecase else 0)
                                                      | (re.M if multiline else 0))),
    "uri": _is_uri, "url": _is_url, "urn": lambda v: str(v).startswith("urn:") and len(str(v).split(":")) >= 3,
    "vault_encrypted": lambda v: str(v).startswith("$ANSIBLE_VAULT;"),
    "vaulted_file": lambda p: os.path.isfile(p) and open(p, "rb").read(15) == b"$ANSIBLE_VAULT;",
}


def _result_test(key, want=True):
    def test(value):
        if not isinstance(value, dict):
            raise TemplateError(f"template error: the test expects a task result, got {type(value).__name__}")
        return bool(value.get(key, False)) == want
    return test


TESTS_MORE.update({
    "failure": _result_test("failed"), "successful": _result_test("failed", False),
    "succeeded": _result_test("failed", False), "skip": _result_test("skipped"),
    "change": _result_test("changed"), "unreachable": _result_test("unreachable"),
    "reachable": _result_test("unreachable", False), "finished": lambda v: bool(v.get("finished", 1)),
    "started": lambda v: bool(v.get("started", 1)), "timedout": lambda v: bool(v.get("timedout", False)),
})


def prefixed(table: dict) -> dict:
    """Each name also as `ansible.builtin.<name>`."""
    return {**table, **{f"ansible.builtin.{k}": v for k, v in table.items()}}
