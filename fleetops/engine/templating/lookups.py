"""ansible-core's `ansible.builtin` lookup plugins that need no network, run on the controller as
ansible-core runs them: `lookup(name, *terms, wantlist=, errors=, **options)`, `query`/`q`
(always a list) and the `with_<name>` loops.

Each plugin is `fn(terms: list, env: LookupEnv, **options) -> list`. A relative file name is
searched as ansible-core's `find_file_in_search_path` searches it: the task's role directory,
then the playbook directory, each with the plugin's subdirectory (files/, templates/) first.
"""
from __future__ import annotations

import csv
import configparser
import copy
import glob
import itertools
import os
import random
import re
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any, Callable

from fleetops.engine.boolean import boolean
from fleetops.engine.templating.errors import TemplateError


class LookupError_(TemplateError):
    """A lookup plugin's own failure (what `errors=warn|ignore` turns into None / [])."""


@dataclass
class LookupEnv:
    """What a lookup sees: the task's variables and a render function for the template lookup."""

    variables: Any
    render_file: Callable[..., str] | None = None

    def search_dirs(self) -> list:
        """The task's `ansible_search_path` (its role's directory, its own file's, the playbook's),
        else the role's and the playbook's directories."""
        given = self.variables.get("ansible_search_path") if "ansible_search_path" in self.variables else None
        if isinstance(given, (list, tuple)) and given:
            return [str(d) for d in given]
        out = []
        for name in ("role_path", "playbook_dir"):
            d = self.variables.get(name) if name in self.variables else None
            if isinstance(d, str) and d and d not in out:
                out.append(d)
        return out or [os.getcwd()]

    def find(self, subdir: str, needle: str, must: bool = True) -> str | None:
        """The file `needle` by ansible-core's search path (DataLoader.path_dwim_relative_stack:
        in each directory `subdir/needle` then `needle`; from a role's nested tasks folder, the
        role's `subdir` and `tasks` too), or None / a LookupError_."""
        needle = str(needle)
        if needle.startswith(("/", "~")):
            path = os.path.expanduser(needle)
            if os.path.exists(path):
                return path
        else:
            cands = []
            for d in self.search_dirs():
                parent = os.path.dirname(d)
                if parent.endswith("/tasks"):
                    cands += [os.path.join(os.path.dirname(parent), subdir, needle), os.path.join(parent, needle)]
                if needle.split("/")[0] != subdir:
                    cands.append(os.path.join(d, subdir, needle))
                cands.append(os.path.join(d, needle))
            for cand in cands:
                if os.path.exists(cand):
                    return cand
        if must:
            raise LookupError_(f"could not locate file in lookup: {needle}")
        return None


def kv_term(term: str, keys: tuple) -> tuple:
    """`'key opt=v opt2=v2'` (the old single-string form of csvfile, ini, password): the first
    word(s) not `k=v` and the options it names."""
    params, words = {}, []
    for word in shlex.split(str(term)):
        k, sep, v = word.partition("=")
        if sep and k in keys:
            params[k] = v
        else:
            words.append(word)
    return " ".join(words), params


def _flag(v) -> bool:
    """A lookup's on/off option, read by the engine's one rule (anything else is off)."""
    return boolean(v, strict=False)


# ---------------------------------------------------------------- the plugins

def _file(terms, env, lstrip=False, rstrip=True):
    out = []
    for term in terms:
        path = env.find("files", term)
        try:
            with open(path, encoding="utf-8", errors="surrogateescape") as f:
                text = f.read()
        except OSError as exc:
            raise LookupError_(f"The 'file' lookup had an issue accessing the file '{term}': {exc}") from None
        if _flag(lstrip):
            text = text.lstrip()
        if _flag(rstrip):
            text = text.rstrip()
        out.append(text)
    return out


def _env(terms, env, default=""):
    return [os.environ.get(str(t).split()[0] if str(t).strip() else str(t), default) for t in terms]


def _template(terms, env, template_vars=None, **style):
    """convert_data and jinja2_native are accepted (ansible-core takes them); the text is the result."""
    for accepted in ("convert_data", "jinja2_native"):
        style.pop(accepted, None)
    out = []
    for term in terms:
        path = env.find("templates", term)
        if env.render_file is None:
            raise LookupError_("the template lookup needs a templar")
        out.append(env.render_file(path, dict(template_vars or {}), style))
    return out


def _shell_out(name: str, term, env) -> str:
    """A term run by the shell in the playbook directory, as pipe and lines run it; its stdout."""
    cwd = env.variables.get("playbook_dir") if "playbook_dir" in env.variables else None
    p = subprocess.run(str(term), shell=True, cwd=cwd or None, capture_output=True)
    if p.returncode != 0:
        raise LookupError_(f"lookup_plugin.{name}({term}) returned {p.returncode}")
    return p.stdout.decode("utf-8", "surrogateescape")


def _pipe(terms, env):
    return [_shell_out("pipe", term, env).rstrip() for term in terms]


def _lines(terms, env):
    return [line for term in terms for line in _shell_out("lines", term, env).splitlines()]


_NO_DEFAULT = object()


def _vars(terms, env, default=_NO_DEFAULT):
    out = []
    for term in terms:
        if not isinstance(term, str):
            raise LookupError_(f"Invalid setting identifier, {term!r} is not a string, it is a {type(term).__name__}")
        if term in env.variables:
            out.append(env.variables[term])
        elif term in env.variables.get("hostvars", {}).get(env.variables.get("inventory_hostname"), {}):
            out.append(env.variables["hostvars"][env.variables["inventory_hostname"]][term])
        elif default is not _NO_DEFAULT:
            out.append(default)
        else:
            raise LookupError_(f"No variable named {term!r} was found.")
    return out


def _varnames(terms, env):
    names = list(env.variables)
    out = []
    for term in terms:
        if not isinstance(term, str):
            raise LookupError_(f"Invalid setting identifier, {term!r} is not a string, it is a {type(term).__name__}")
        try:
            rx = re.compile(term)
        except re.error as exc:
            raise LookupError_(f"Unable to use {term!r} as a search parameter: {exc}") from None
        out.extend(n for n in names if rx.search(n))
    return out


def _split_list(value) -> list:
    if isinstance(value, str):
        return [x for x in re.split(r"[,;:]", value) if x] if value else []
    return list(value or [])


def _first_found(terms, env, files=None, paths=None, skip=False):
    cands: list = []
    pending = []
    for term in terms:
        if isinstance(term, dict):
            pending.append((_split_list(term.get("files")), _split_list(term.get("paths")),
                            _flag(term.get("skip", skip))))
        elif isinstance(term, (list, tuple)):
            pending.extend((_split_list(t) if isinstance(t, str) else [t], [], skip) for t in term)
        else:
            pending.append(([term], [], skip))
    if files is not None or paths is not None:
        pending = [(_split_list(files) or [f for fs, _, _ in pending for f in fs], _split_list(paths), skip)]
    skip_all = any(s for _, _, s in pending) or _flag(skip)
    for fs, ps, _ in pending:
        for f in fs:
            if ps:
                cands.extend(os.path.join(p, f) for p in ps)
            else:
                cands.append(f)
    for cand in cands:
        found = env.find("files", cand, must=False)
        if found:
            return [os.path.abspath(found)]
    if skip_all:
        return []
    raise LookupError_("No file was found when using first_found.")


def _fileglob(terms, env):
    out = []
    for term in terms:
        term = str(term)
        if term.startswith("/"):
            dirs = [os.path.dirname(term)]
        else:
            dirs = [os.path.join(d, "files", os.path.dirname(term)) for d in env.search_dirs()]
            dirs += [os.path.join(d, os.path.dirname(term)) for d in env.search_dirs()]
        for d in dirs:
            hits = [p for p in sorted(glob.glob(os.path.join(d, os.path.basename(term)))) if os.path.isfile(p)]
            if hits:
                out.extend(hits)
                break
    return out


def _flatten_one(terms):
    out = []
    for t in terms:
        out.extend(t) if isinstance(t, (list, tuple)) else out.append(t)
    return out


def _indexed_items(terms, env):
    if not isinstance(terms, list):
        raise LookupError_("with_indexed_items expects a list")
    return [[i, x] for i, x in enumerate(_flatten_one(terms))]


def _dict(terms, env):
    out = []
    for term in terms:
        if not isinstance(term, dict):
            raise LookupError_(f"with_dict expects a dict, got {type(term).__name__}")
        out.extend({"key": k, "value": v} for k, v in term.items())
    return out


def _nested(terms, env):
    lists = [t if isinstance(t, list) else [t] for t in terms]
    if not lists:
        raise LookupError_("with_nested requires at least one element in the nested list")
    return [list(_flatten_one(list(p))) for p in itertools.product(*lists)]


def _together(terms, env):
    if not terms:
        raise LookupError_("with_together requires at least one element in each list")
    return [list(t) for t in itertools.zip_longest(*[t if isinstance(t, list) else [t] for t in terms])]


def subelements_lookup(terms, env, skip_missing=False, _pop=True):
    def terms_error(msg=""):
        return LookupError_("subelements lookup expects a list of two or three items, " + msg)
    if not isinstance(terms, list) or not 2 <= len(terms) <= 3:
        raise terms_error()
    if not isinstance(terms[0], (list, dict)) or not isinstance(terms[1], str):
        raise terms_error("first a dict or a list, second a string pointing to the subkey")
    items, key = terms[0], terms[1]
    if isinstance(items, dict):
        if items.get("skipped", False) is not False:
            return []
        items = list(items.values())
    flags = terms[2] if len(terms) == 3 else {}
    if not isinstance(flags, dict) or set(flags) - {"skip_missing"}:
        raise terms_error("the optional third item must be a dict with flags ('skip_missing',)")
    skip = _flag(flags.get("skip_missing", skip_missing))
    out = []
    path = key.split(".")
    for item in copy.deepcopy(items):
        if not isinstance(item, dict):
            raise LookupError_(f"subelements lookup expects a dictionary, got '{item}'")
        if item.get("skipped", False) is not False:
            continue
        sub, found = item, []
        for i, part in enumerate(path):
            last = i == len(path) - 1
            if part not in sub:
                if skip:
                    continue
                raise LookupError_(f"could not find '{part}' key in iterated item '{sub}'")
            if not last:
                if not isinstance(sub[part], dict):
                    if skip:
                        continue
                    raise LookupError_(f"the key {part} should point to a dictionary, got '{sub[part]}'")
                sub = sub[part]
            elif not isinstance(sub[part], list):
                raise LookupError_(f"the key {part} should point to a list, got '{sub[part]}'")
            else:
                # as ansible-core's lookup: the first element no longer holds the list (its filter keeps it)
                found = sub.pop(part) if _pop else sub[part]
        out.extend([item, s] for s in found)
    return out


def _random_choice(terms, env):
    return [random.choice(terms)] if terms else []


LOOKUPS: dict = {
    "file": _file, "env": _env, "template": _template, "pipe": _pipe, "lines": _lines,
    "vars": _vars, "varnames": _varnames, "first_found": _first_found, "fileglob": _fileglob,
    "items": lambda terms, env: _flatten_one(terms), "indexed_items": _indexed_items,
    "dict": _dict, "list": lambda terms, env: list(terms), "nested": _nested, "together": _together,
    "subelements": subelements_lookup, "random_choice": _random_choice,
}


def listify_terms(terms) -> list:
    """A with_<lookup>'s (rendered) value as the plugin's term list: a string is one term."""
    if isinstance(terms, (str, bytes)) or not isinstance(terms, (list, tuple)):
        return [terms]
    return list(terms)


def invoke(name: str, terms: list, env: LookupEnv, kwargs: dict, query: bool) -> Any:
    """Run a lookup as ansible-core's `lookup()`/`query()` does: wantlist, errors, the result's shape."""
    wantlist = query or _flag(kwargs.pop("wantlist", False))
    errors = kwargs.pop("errors", "strict")
    if errors not in ("strict", "warn", "ignore"):
        raise TemplateError(f"template error: lookup '{name}': errors must be strict, warn or ignore")
    fn = LOOKUPS.get(name)
    if fn is None:
        raise TemplateError(f"template error: unknown lookup '{name}'")
    try:
        res = fn(list(terms), env, **kwargs)
    except TypeError as exc:
        raise TemplateError(f"template error: lookup '{name}': {exc}") from None
    except (LookupError_, OSError, ValueError, csv.Error, configparser.Error) as exc:
        if errors == "strict":
            msg = exc.msg if isinstance(exc, TemplateError) else str(exc)
            raise TemplateError(f"template error: lookup '{name}': {msg}") from None
        return [] if wantlist else None
    if not wantlist and res:
        if len(res) == 1:
            return res[0]
        if all(isinstance(x, str) for x in res):
            return ",".join(res)
    return res
