"""The playbook model: Plays and Tasks built from position-carrying YAML.

Everything a playbook can get wrong without knowing hosts or variables is
caught here (unknown keys, wrong types, unknown modules and arguments), each
as one BadInput naming the exact file:line:column, so nothing is half-run.

Block keywords are inherited the Ansible way when the model is built: a
task's `tags`, `when`, `vars`, `become`, `become_user`, `check_mode`,
`ignore_errors`, `run_once` and `delegate_to` are already the effective values
(own + enclosing blocks + play), so applying them again is harmless.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from typing import Any

from fleetops.engine.yamlsrc import Mapping, Sequence, load_yaml
from fleetops.errors import BadInput

LOCALHOST = ("localhost", "127.0.0.1")
_IDENT = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")
_PERCENT = re.compile(r"\A\s*(\d+(?:\.\d+)?)\s*%\s*\Z")
_BUILTIN_PREFIXES = ("ansible.builtin.", "ansible.legacy.")

PLAY_KEYS = ("name", "hosts", "vars", "vars_files", "serial", "max_fail_percentage",
             "any_errors_fatal", "gather_facts", "tasks", "handlers", "tags", "become",
             "become_user")
TASK_KEYS = ("name", "args", "when", "loop", "with_items", "loop_control", "register",
             "retries", "until", "delay", "failed_when", "changed_when", "ignore_errors",
             "notify", "tags", "run_once", "delegate_to", "check_mode", "vars", "become",
             "become_user", "block", "rescue", "always", "listen")
BLOCK_KEYS = ("name", "when", "tags", "vars", "become", "become_user", "check_mode",
              "ignore_errors", "run_once", "delegate_to", "block", "rescue", "always")
LOOP_CONTROL_KEYS = ("loop_var", "label")
_NOT_SUPPORTED = {
    "import_playbook": "import_playbook is not supported: run each playbook separately",
    "roles": "roles are not supported: put the tasks in the play",
    "pre_tasks": "pre_tasks is not supported: put the tasks first in 'tasks'",
    "post_tasks": "post_tasks is not supported: put the tasks last in 'tasks'",
    "include_tasks": "include_tasks is not supported: put the tasks in the play",
    "import_tasks": "import_tasks is not supported: put the tasks in the play",
    "include_role": "include_role is not supported",
    "import_role": "import_role is not supported",
    "include_vars": "include_vars is not supported: use vars_files",
    "environment": "unknown key 'environment' (not supported: set variables in the command)",
}


@dataclass
class Task:
    """One task, block (module None, `block` set) or handler (is_handler True)."""

    where: str
    name: str | None = None
    module: str | None = None
    args: dict = field(default_factory=dict)      # unrendered; a Mapping with key_where()
    when: list = field(default_factory=list)       # raw expressions/bools, ANDed (incl. enclosing blocks')
    loop: Any = None                               # raw: a list or a template string
    loop_var: str = "item"
    loop_label: Any = None
    register: str | None = None
    retries: Any = None                            # int or template; 3 when `until` is set without it
    until: list | None = None                      # raw expressions, ANDed
    delay: Any = 5
    failed_when: list | None = None
    changed_when: list | None = None
    ignore_errors: bool = False
    notify: list = field(default_factory=list)
    tags: list = field(default_factory=list)       # effective: play + blocks + own
    run_once: bool = False
    delegate_to: str | None = None                 # only "localhost" / "127.0.0.1"
    check_mode: bool | None = None
    vars: dict = field(default_factory=dict)       # effective: enclosing blocks' vars, then own
    become: bool = False                           # effective (play, blocks, own)
    become_user: str | None = None                 # effective
    block: list | None = None
    rescue: list | None = None
    always: list | None = None
    listen: list = field(default_factory=list)
    is_handler: bool = False
    positions: dict = field(default_factory=dict, repr=False)   # key -> file:line:col
    own: dict = field(default_factory=dict, repr=False)         # own 'when'/'vars' before inheritance

    def key_where(self, key: str) -> str:
        """file:line:col of one of this task's keys (the task's own position if absent)."""
        return self.positions.get(key, self.where)

    @property
    def is_block(self) -> bool:
        return self.block is not None

    @property
    def display_name(self) -> str:
        return self.name or self.module or "block"


@dataclass
class Play:
    where: str
    name: str | None = None
    hosts: str = ""
    vars: dict = field(default_factory=dict)
    vars_files: list = field(default_factory=list)  # paths joined to the playbook's directory
    serial: list = field(default_factory=list)      # [] = all hosts at once; ints and "N%" strings
    max_fail_percentage: float | None = None
    # a templated serial / max_fail_percentage: {key: (template, where)}, rendered by validate()
    # from play vars, vars_files and extra vars before any host is touched (see set_limit)
    limit_templates: dict = field(default_factory=dict, repr=False)
    limits_resolved: bool = field(default=False, repr=False)
    any_errors_fatal: bool = False
    gather_facts: bool = True
    tasks: list = field(default_factory=list)
    handlers: list = field(default_factory=list)
    tags: list = field(default_factory=list)
    become: bool = False
    become_user: str | None = None
    vars_files_where: list = field(default_factory=list, repr=False)
    positions: dict = field(default_factory=dict, repr=False)

    def key_where(self, key: str) -> str:
        return self.positions.get(key, self.where)


@dataclass
class Playbook:
    path: str
    plays: list = field(default_factory=list)

    @property
    def dir(self) -> str:
        """playbook_dir: where vars_files, templates/ and files/ resolve from."""
        return os.path.dirname(os.path.abspath(self.path))


# ---------------------------------------------------------------- small checks

def _kind(value) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an int"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _close(word, options) -> str:
    if not isinstance(word, str):
        return ""
    found = difflib.get_close_matches(word, list(options), n=3, cutoff=0.6)
    return f" (did you mean: {', '.join(found)}?)" if found else ""


def is_template(value) -> bool:
    return isinstance(value, str) and any(m in value for m in ("{{", "{%", "{#"))


def _want_bool(m: Mapping, key, default=None):
    if key not in m or m[key] is None:
        return default
    v = m[key]
    if not isinstance(v, bool):
        raise BadInput(f"'{key}' must be true or false, not {_kind(v)}", where=m.value_where(key))
    return v


def _want_str(m: Mapping, key, default=None, allow_empty=False):
    if key not in m or m[key] is None:
        return default
    v = m[key]
    if not isinstance(v, str) or (not allow_empty and not v.strip()):
        raise BadInput(f"'{key}' must be a non-empty string, not {_kind(v)}", where=m.value_where(key))
    return v


def _want_name(m: Mapping, key, what="variable name"):
    v = _want_str(m, key)
    if v is not None and not _IDENT.match(v):
        raise BadInput(f"'{key}' must be a valid {what} (letters, digits, _), not {v!r}",
                       where=m.value_where(key))
    return v


def _want_int_or_template(m: Mapping, key, default=None, minimum=0):
    if key not in m or m[key] is None:
        return default
    v = m[key]
    if is_template(v):
        return v
    if isinstance(v, bool) or not isinstance(v, int):
        raise BadInput(f"'{key}' must be an integer, not {_kind(v)}", where=m.value_where(key))
    if v < minimum:
        raise BadInput(f"'{key}' must be at least {minimum}, not {v}", where=m.value_where(key))
    return v


def _want_str_list(m: Mapping, key, split_commas=False) -> list:
    """A string or a list of strings (`tags: a` -> ['a'])."""
    if key not in m or m[key] is None:
        return []
    v = m[key]
    if isinstance(v, str):
        items = [s.strip() for s in v.split(",")] if split_commas else [v]
        return [s for s in items if s]
    if isinstance(v, list):
        for i, item in enumerate(v):
            if not isinstance(item, str) or not item.strip():
                where = v.item_where(i) if isinstance(v, Sequence) else m.value_where(key)
                raise BadInput(f"'{key}' items must be non-empty strings, not {_kind(item)}", where=where)
        return list(v)
    raise BadInput(f"'{key}' must be a string or a list of strings, not {_kind(v)}",
                   where=m.value_where(key))


def _want_conditions(m: Mapping, key) -> list | None:
    """when/until/failed_when/changed_when: a string, a bool, or a list of them."""
    if key not in m or m[key] is None:
        return None
    v = m[key]
    items = v if isinstance(v, list) else [v]
    for i, item in enumerate(items):
        if not isinstance(item, (str, bool)) or (isinstance(item, str) and not item.strip()):
            where = v.item_where(i) if isinstance(v, Sequence) else m.value_where(key)
            raise BadInput(f"'{key}' must be an expression, a bool or a list of them, not {_kind(item)}",
                           where=where)
    return list(items)


def _want_vars(m: Mapping, key) -> dict:
    if key not in m or m[key] is None:
        return {}
    v = m[key]
    if not isinstance(v, dict):
        raise BadInput(f"'{key}' must be a mapping of variable names to values, not {_kind(v)}",
                       where=m.value_where(key))
    check_var_names(v)
    return v


def check_var_names(mapping: dict) -> None:
    """Every variable name must be usable in a template."""
    for k in mapping:
        if not isinstance(k, str) or not _IDENT.match(k):
            where = mapping.key_where(k) if isinstance(mapping, Mapping) else None
            raise BadInput(f"invalid variable name {k!r} (letters, digits and _ only)", where=where)


def _unknown_keys(m: Mapping, allowed, what: str, extra_options=()):
    for k in m:
        if k not in allowed:
            if k in _NOT_SUPPORTED:
                raise BadInput(_NOT_SUPPORTED[k], where=m.key_where(k))
            raise BadInput(f"unknown key {k!r} in {what}{_close(k, tuple(allowed) + tuple(extra_options))}",
                           where=m.key_where(k))


# ---------------------------------------------------------------- play

def _plain(value):
    """Plain lists and strs from the YAML source types (for rendering later)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, str) else value


def _any_template(value) -> bool:
    if isinstance(value, list):
        return any(_any_template(v) for v in value)
    return is_template(value)


def _serial(m: Mapping) -> list:
    if "serial" not in m or m["serial"] is None:
        return []
    raw = m["serial"]
    return _serial_items(raw, lambda i: raw.item_where(i) if isinstance(raw, Sequence) else m.value_where("serial"),
                         m.value_where("serial"))


def _serial_items(raw, where_of, where_all: str) -> list:
    """serial as a checked list; where_of(i) locates item i in errors, where_all the whole value."""
    items = raw if isinstance(raw, list) else [raw]
    out = []
    for i, item in enumerate(items):
        where = where_of(i)
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item.strip())
        if isinstance(item, int) and not isinstance(item, bool):
            if item < 1:
                raise BadInput(f"'serial' entries must be positive integers or '1%'..'100%', not {item}",
                               where=where)
            out.append(item)
            continue
        if isinstance(item, str):
            pm = _PERCENT.match(item)
            if pm and 0 < float(pm.group(1)) <= 100:
                out.append(f"{pm.group(1)}%")
                continue
        raise BadInput(f"'serial' entries must be positive integers or '1%'..'100%', not {item!r}",
                       where=where)
    if not out:
        raise BadInput("'serial' list is empty", where=where_all)
    return out


def _max_fail(mfp, where: str) -> float:
    if isinstance(mfp, str):
        try:
            mfp = float(mfp.strip().rstrip("%"))
        except ValueError:
            pass
    if isinstance(mfp, bool) or not isinstance(mfp, (int, float)) or not 0 <= mfp <= 100:
        raise BadInput(f"'max_fail_percentage' must be a number from 0 to 100, not {mfp!r}", where=where)
    return float(mfp)


def set_limit(play: Play, key: str, rendered) -> None:
    """Set a templated serial / max_fail_percentage from its rendered value, checked as the
    literal forms are; a bad value is a BadInput at the template's line."""
    where = play.limit_templates[key][1]
    if key == "serial":
        play.serial = [] if rendered in (None, "", []) else _serial_items(rendered, lambda i: where, where)
    else:
        play.max_fail_percentage = None if rendered in (None, "") else _max_fail(rendered, where)


def _play(m, base_dir: str, modules: dict, index: int, path: str) -> Play:
    if not isinstance(m, Mapping):
        raise BadInput(f"play #{index + 1} must be a mapping, not {_kind(m)}",
                       where=getattr(m, "where", None) or path)
    _unknown_keys(m, PLAY_KEYS, "play")
    play = Play(where=m.where, positions={k: m.key_where(k) for k in m})
    if "hosts" not in m or m["hosts"] is None:
        raise BadInput("play has no 'hosts'", where=m.where)
    hosts = m["hosts"]
    if isinstance(hosts, list):
        for i, h in enumerate(hosts):
            if not isinstance(h, str) or not h.strip():
                raise BadInput(f"'hosts' items must be host patterns, not {_kind(h)}", where=hosts.item_where(i))
        hosts = ":".join(h.strip() for h in hosts)
    if not isinstance(hosts, str) or not hosts.strip():
        raise BadInput(f"'hosts' must be a host pattern, not {_kind(hosts)}", where=m.value_where("hosts"))
    if is_template(hosts):
        raise BadInput("a templated 'hosts' is not supported: use a pattern and --limit",
                       where=m.value_where("hosts"))
    play.hosts = hosts.strip()
    play.name = _want_str(m, "name", default=play.hosts)
    play.vars = _want_vars(m, "vars")
    raw_files = m.get("vars_files")
    if raw_files is not None:
        items = raw_files if isinstance(raw_files, list) else [raw_files]
        for i, f in enumerate(items):
            where = raw_files.item_where(i) if isinstance(raw_files, Sequence) else m.value_where("vars_files")
            if not isinstance(f, str) or not f.strip():
                raise BadInput(f"'vars_files' items must be file paths, not {_kind(f)}", where=where)
            if is_template(f):
                raise BadInput("a templated vars_files path is not supported", where=where)
            play.vars_files.append(os.path.join(base_dir, os.path.expanduser(f)))
            play.vars_files_where.append(where)
    if _any_template(m.get("serial")):
        play.limit_templates["serial"] = (_plain(m["serial"]), m.value_where("serial"))
    else:
        play.serial = _serial(m)
    mfp = m.get("max_fail_percentage")
    if is_template(mfp):
        play.limit_templates["max_fail_percentage"] = (str(mfp), m.value_where("max_fail_percentage"))
    elif mfp is not None:
        play.max_fail_percentage = _max_fail(mfp, m.value_where("max_fail_percentage"))
    play.any_errors_fatal = _want_bool(m, "any_errors_fatal", False)
    play.gather_facts = _want_bool(m, "gather_facts", True)
    play.tags = _want_str_list(m, "tags", split_commas=True)
    play.become = _want_bool(m, "become", False)
    play.become_user = _want_str(m, "become_user")
    inherited = _Inherit(tags=list(play.tags), become=play.become, become_user=play.become_user)
    play.tasks = _task_list(m, "tasks", modules, inherited, handler=False)
    play.handlers = _task_list(m, "handlers", modules, inherited, handler=True)
    return play


# ---------------------------------------------------------------- tasks

@dataclass
class _Inherit:
    """Keyword values flowing from the play and enclosing blocks into tasks."""

    tags: list = field(default_factory=list)
    when: list = field(default_factory=list)
    vars: dict = field(default_factory=dict)
    become: bool = False
    become_user: str | None = None
    check_mode: bool | None = None
    ignore_errors: bool = False
    run_once: bool = False
    delegate_to: str | None = None


def _task_list(m: Mapping, key: str, modules: dict, inherited: _Inherit, handler: bool) -> list | None:
    if key not in m or m[key] is None:
        return [] if key in ("tasks", "handlers") else None
    raw = m[key]
    if not isinstance(raw, list):
        raise BadInput(f"'{key}' must be a list of tasks, not {_kind(raw)}", where=m.value_where(key))
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise BadInput(f"each entry of '{key}' must be a task (a mapping), not {_kind(item)}",
                           where=raw.item_where(i))
        out.append(_task(item, modules, inherited, handler))
    return out


def resolve_module(name, modules: dict) -> str | None:
    """The registry name for a task key (accepts `ansible.builtin.X`), or None."""
    if not isinstance(name, str):
        return None
    if name in modules:
        return name
    for prefix in _BUILTIN_PREFIXES:
        if name.startswith(prefix) and name[len(prefix):] in modules:
            return name[len(prefix):]
    return None


def _split_kv(text: str, where: str) -> list[str]:
    """Split `a=1 b="x y" c={{ v }}` on spaces outside quotes and Jinja2 braces."""
    tokens, cur, quote, depth, i = [], [], None, 0, 0
    while i < len(text):
        c, pair = text[i], text[i:i + 2]
        if quote:
            cur.append(c)
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i + 1])
                i += 1
            elif c == quote:
                quote = None
        elif pair in ("{{", "{%", "{#"):
            depth += 1
            cur.append(pair)
            i += 1
        elif pair in ("}}", "%}", "#}") and depth:
            depth -= 1
            cur.append(pair)
            i += 1
        elif c in "'\"" and not depth:
            quote = c
            cur.append(c)
        elif c.isspace() and not depth:
            if cur:
                tokens.append("".join(cur))
                cur = []
        else:
            cur.append(c)
        i += 1
    if quote or depth:
        raise BadInput("unbalanced quotes or braces in the module arguments", where=where)
    if cur:
        tokens.append("".join(cur))
    return tokens


def _parse_kv(text: str, where: str) -> dict:
    out = {}
    for tok in _split_kv(text, where):
        key, eq, value = tok.partition("=")
        if not eq or not _IDENT.match(key):
            raise BadInput(f"module arguments must be key=value, not {tok!r}", where=where)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        if key in out:
            raise BadInput(f"argument {key!r} given twice", where=where)
        out[key] = value
    return out


def _coerce_kv(value: str, spec_type):
    """`k=v` values are strings; turn literal numbers/bools into the declared type."""
    types_ = spec_type if isinstance(spec_type, tuple) else (spec_type,)
    if str in types_ or is_template(value):
        return value
    if bool in types_ and value.lower() in ("true", "yes", "on", "false", "no", "off"):
        return value.lower() in ("true", "yes", "on")
    for t in (int, float):
        if t in types_:
            try:
                return t(value)
            except ValueError:
                pass
    return value


def _module_args(m: Mapping, key: str, mod_name: str, mod_cls, where_key: str) -> Mapping:
    """Build the task's args (free form -> cmd, k=v strings, the `args:` key merged)."""
    value = m[key]
    args = Mapping()
    args.where = m.value_where(key)
    spec = getattr(mod_cls, "args", {}) or {}
    if isinstance(value, dict):
        for k, v in value.items():
            args[k] = v
            args.set_where(k, value.key_where(k) if isinstance(value, Mapping) else where_key,
                           value.value_where(k) if isinstance(value, Mapping) else None)
    elif isinstance(value, str) and getattr(mod_cls, "free_form", False):
        args["cmd"] = value
        args.set_where("cmd", where_key, m.value_where(key))
    elif isinstance(value, str):
        for k, v in _parse_kv(value, m.value_where(key)).items():
            args[k] = _coerce_kv(v, spec[k].type) if k in spec else v
            args.set_where(k, where_key, m.value_where(key))
    elif value is not None:
        raise BadInput(f"arguments of module '{mod_name}' must be a mapping"
                       f"{' or a command string' if getattr(mod_cls, 'free_form', False) else ''}, "
                       f"not {_kind(value)}", where=m.value_where(key))
    extra = m.get("args")
    if extra is not None:
        if not isinstance(extra, dict):
            raise BadInput(f"'args' must be a mapping, not {_kind(extra)}", where=m.value_where("args"))
        for k, v in extra.items():
            kw = extra.key_where(k) if isinstance(extra, Mapping) else m.key_where("args")
            if k in args:
                raise BadInput(f"argument {k!r} given twice (in the module and in 'args')", where=kw)
            args[k] = v
            args.set_where(k, kw, extra.value_where(k) if isinstance(extra, Mapping) else None)
    return args


def _type_names(t) -> str:
    types_ = t if isinstance(t, tuple) else (t,)
    return " or ".join(x.__name__ for x in types_)


def _type_ok(value, t) -> bool:
    types_ = t if isinstance(t, tuple) else (t,)
    if isinstance(value, bool):
        return bool in types_
    if isinstance(value, int) and float in types_:
        return True
    return isinstance(value, types_)


def _has_template(value) -> bool:
    if isinstance(value, str):
        return is_template(value)
    return False


def check_args(task: Task, modules: dict) -> None:
    """Module arguments against the module's declared `args`: names, required, literal types, choices."""
    if task.module is None:
        return
    mod_cls = modules[task.module]
    spec = getattr(mod_cls, "args", {}) or {}
    args = task.args
    kw = args.key_where if isinstance(args, Mapping) else (lambda k: task.key_where(task.module))
    vw = args.value_where if isinstance(args, Mapping) else kw
    allow_cmd = getattr(mod_cls, "free_form", False)
    any_args = getattr(mod_cls, "any_args", False)   # set_fact: every other key is a variable name
    for k, v in args.items():
        if any_args and k not in spec:
            if not isinstance(k, str) or not _IDENT.match(k):
                raise BadInput(f"invalid variable name {k!r} for module '{task.module}' "
                               "(letters, digits and _ only)", where=kw(k))
            continue
        if k not in spec and not (allow_cmd and k == "cmd"):
            raise BadInput(f"unknown argument {k!r} for module '{task.module}'"
                           f"{_close(k, spec) or (' (it takes: ' + ', '.join(sorted(spec)) + ')' if spec else ' (it takes no arguments)')}",
                           where=kw(k))
        if k not in spec or v is None or _has_template(v):
            continue
        a = spec[k]
        if not _type_ok(v, a.type):
            raise BadInput(f"argument {k!r} of module '{task.module}' must be {_type_names(a.type)}, "
                           f"not {_kind(v)}", where=vw(k))
        if a.choices is not None and v not in a.choices:
            raise BadInput(f"argument {k!r} of module '{task.module}' must be one of "
                           f"{', '.join(map(str, a.choices))}, not {v!r}", where=vw(k))
    for k, a in spec.items():
        if a.required and args.get(k) is None:
            raise BadInput(f"module '{task.module}' needs argument {k!r}",
                           where=task.key_where(task.module))


def _task(m: Mapping, modules: dict, inh: _Inherit, handler: bool) -> Task:
    task = Task(where=m.where, positions={k: m.key_where(k) for k in m}, is_handler=handler)
    keys = set(TASK_KEYS)
    extra = [k for k in m if k not in keys]
    mods = [k for k in extra if resolve_module(k, modules)]
    others = [k for k in extra if k not in mods]
    is_block = "block" in m
    for k in others:
        if k in _NOT_SUPPORTED:
            raise BadInput(_NOT_SUPPORTED[k], where=m.key_where(k))
        near_key, near_mod = _close(k, TASK_KEYS), _close(k, modules)
        if mods or is_block or (near_key and not near_mod) or not isinstance(k, str):
            raise BadInput(f"unknown key {k!r} in task{near_key or near_mod}", where=m.key_where(k))
        raise BadInput(f"unknown module {k!r}{near_mod}", where=m.key_where(k))
    if len(mods) > 1:
        raise BadInput(f"task has two module keys: {mods[0]!r} and {mods[1]!r}", where=m.key_where(mods[1]))
    if is_block and mods:
        raise BadInput(f"a block cannot also run a module ({mods[0]!r})", where=m.key_where(mods[0]))
    if not is_block:
        for k in ("rescue", "always"):
            if k in m:
                raise BadInput(f"'{k}' needs a 'block'", where=m.key_where(k))
    if not is_block and not mods:
        raise BadInput("task has no module (expected one of: " + ", ".join(sorted(modules)) + ")",
                       where=m.where)
    if is_block:
        for k in m:
            if k not in BLOCK_KEYS:
                raise BadInput(f"'{k}' is not allowed on a block", where=m.key_where(k))
        if handler:
            raise BadInput("a handler cannot be a block", where=m.key_where("block"))

    task.name = _want_str(m, "name")
    own_when = _want_conditions(m, "when") or []
    task.own["when"] = own_when
    task.when = list(inh.when) + own_when
    own_tags = _want_str_list(m, "tags", split_commas=True)
    task.tags = list(dict.fromkeys(inh.tags + own_tags))
    own_vars = _want_vars(m, "vars")
    task.own["vars"] = own_vars
    task.vars = {**inh.vars, **own_vars}
    own_become = _want_bool(m, "become")
    task.become = inh.become if own_become is None else own_become
    task.become_user = _want_str(m, "become_user", default=inh.become_user)
    own_check = _want_bool(m, "check_mode")
    task.check_mode = inh.check_mode if own_check is None else own_check
    own_ignore = _want_bool(m, "ignore_errors")
    task.ignore_errors = inh.ignore_errors if own_ignore is None else own_ignore
    own_once = _want_bool(m, "run_once")
    task.run_once = inh.run_once if own_once is None else own_once
    delegate = _want_str(m, "delegate_to")
    if delegate is not None and delegate.strip() not in LOCALHOST:
        raise BadInput(f"delegate_to {delegate!r} is not supported: only localhost / 127.0.0.1",
                       where=m.value_where("delegate_to"))
    task.delegate_to = delegate.strip() if delegate is not None else inh.delegate_to

    if is_block:
        sub = _Inherit(tags=task.tags, when=task.when, vars=task.vars, become=task.become,
                       become_user=task.become_user, check_mode=task.check_mode,
                       ignore_errors=task.ignore_errors, run_once=task.run_once,
                       delegate_to=task.delegate_to)
        task.block = _task_list(m, "block", modules, sub, handler)
        task.rescue = _task_list(m, "rescue", modules, sub, handler)
        task.always = _task_list(m, "always", modules, sub, handler)
        if not task.block:
            raise BadInput("'block' is empty", where=m.key_where("block"))
        return task

    key = mods[0]
    task.module = resolve_module(key, modules)
    task.positions.setdefault(task.module, m.key_where(key))
    task.args = _module_args(m, key, task.module, modules[task.module], m.key_where(key))
    if "loop" in m and "with_items" in m:
        raise BadInput("use either 'loop' or 'with_items', not both", where=m.key_where("with_items"))
    loop_key = "loop" if "loop" in m else ("with_items" if "with_items" in m else None)
    if loop_key:
        loop = m[loop_key]
        if not isinstance(loop, list) and not is_template(loop):
            raise BadInput(f"'{loop_key}' must be a list or a template giving one, not {_kind(loop)}",
                           where=m.value_where(loop_key))
        task.loop = loop
        if loop_key == "with_items":
            task.positions.setdefault("loop", m.key_where("with_items"))
    lc = m.get("loop_control")
    if lc is not None:
        if not isinstance(lc, Mapping):
            raise BadInput(f"'loop_control' must be a mapping, not {_kind(lc)}",
                           where=m.value_where("loop_control"))
        _unknown_keys(lc, LOOP_CONTROL_KEYS, "loop_control")
        task.loop_var = _want_name(lc, "loop_var") or "item"
        task.loop_label = lc.get("label")
    task.register = _want_name(m, "register")
    task.until = _want_conditions(m, "until")
    task.retries = _want_int_or_template(m, "retries")
    if task.until is not None and task.retries is None:
        task.retries = 3
    task.delay = _want_int_or_template(m, "delay", default=5)
    task.failed_when = _want_conditions(m, "failed_when")
    task.changed_when = _want_conditions(m, "changed_when")
    task.notify = _want_str_list(m, "notify")
    task.listen = _want_str_list(m, "listen")
    if task.listen and not handler:
        raise BadInput("'listen' is only for handlers", where=m.key_where("listen"))
    if handler and not (task.name or task.listen):
        raise BadInput("a handler needs a 'name' (or 'listen') to be notified by", where=m.where)
    check_args(task, modules)
    return task


# ---------------------------------------------------------------- entry point

def load_playbook(path: str, modules: dict[str, type]) -> Playbook:
    """Load and check a playbook file: a list of plays. Raises BadInput with file:line:col."""
    data = load_yaml(path)
    if data is None:
        raise BadInput("the playbook is empty", where=str(path))
    if isinstance(data, Mapping):
        if "import_playbook" in data:
            raise BadInput(_NOT_SUPPORTED["import_playbook"], where=data.key_where("import_playbook"))
        raise BadInput("a playbook must be a list of plays (start each play with '- hosts: ...')",
                       where=data.where)
    if not isinstance(data, Sequence):
        raise BadInput(f"a playbook must be a list of plays, not {_kind(data)}", where=str(path))
    if not data:
        raise BadInput("the playbook has no plays", where=data.where)
    base = os.path.dirname(os.path.abspath(path))
    book = Playbook(path=str(path))
    for i, item in enumerate(data):
        if isinstance(item, Mapping) and "import_playbook" in item:
            raise BadInput(_NOT_SUPPORTED["import_playbook"], where=item.key_where("import_playbook"))
        if not isinstance(item, Mapping):
            raise BadInput(f"play #{i + 1} must be a mapping, not {_kind(item)}", where=data.item_where(i))
        book.plays.append(_play(item, base, modules, i, str(path)))
    return book


def walk_tasks(tasks):
    """Every task in a list, depth first, blocks included (block, rescue, always)."""
    for t in tasks or ():
        yield t
        if t.is_block:
            yield from walk_tasks(t.block)
            yield from walk_tasks(t.rescue)
            yield from walk_tasks(t.always)
