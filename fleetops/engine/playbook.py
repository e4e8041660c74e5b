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
             "become_user", "remote_user", "pre_tasks", "post_tasks", "roles", "strategy", "order")
# play keywords that may be templates of play vars, vars_files and -e (rendered by validate)
PLAY_BOOL_KEYS = ("any_errors_fatal", "gather_facts")
STRATEGIES = ("linear", "free")
ORDERS = ("inventory", "reverse_inventory", "sorted", "reverse_sorted", "shuffle")
TASK_KEYS = ("name", "args", "when", "loop", "with_items", "loop_control", "register",
             "retries", "until", "delay", "failed_when", "changed_when", "ignore_errors",
             "notify", "tags", "run_once", "delegate_to", "check_mode", "vars", "become",
             "become_user", "block", "rescue", "always", "listen", "remote_user", "action", "local_action")
BLOCK_KEYS = ("name", "when", "tags", "vars", "become", "become_user", "check_mode",
              "ignore_errors", "run_once", "delegate_to", "block", "rescue", "always", "remote_user")
INCLUDE_KEYS = ("include_tasks", "import_tasks", "include_role", "import_role")
INCLUDE_TASK_KEYS = BLOCK_KEYS[:-4] + ("remote_user", "args")
ROLE_ENTRY_KEYS = ("role", "name", "when", "tags", "vars", "become", "become_user", "remote_user")
ROLE_KEYWORDS = ROLE_ENTRY_KEYS[2:]
ROLE_FROM_KEYS = ("tasks_from", "vars_from", "defaults_from", "handlers_from")
LOOP_CONTROL_KEYS = ("loop_var", "label")
_NOT_SUPPORTED = {
    "import_playbook": "import_playbook is not supported: run each playbook separately",
    "include": "'include' was removed from Ansible (2.16): use include_tasks or import_tasks",
    "include_vars": "include_vars is not supported: use vars_files",
    "environment": "unknown key 'environment' (not supported: set variables in the command)",
    "vars_prompt": "vars_prompt is not supported: a fleet run never stops to ask; pass -e instead",
    "async": "async/poll are not supported: use a command's own timeout",
    "poll": "async/poll are not supported: use a command's own timeout",
    "delegate_facts": "delegate_facts is not supported (delegate_to runs on localhost only)",
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
    remote_user: str | None = None                 # effective (play, blocks, own)
    role: str | None = None                        # the role this task comes from
    role_path: str | None = None                   # its directory: templates/ and files/ resolve there first
    defaults: dict = field(default_factory=dict)   # role defaults: below every other variable
    include: str | None = None                     # include_tasks / import_tasks / *_role: a block of its file
    action: str | None = None                      # the module or include key as written (ansible.builtin.x)
    implicit: bool = False                         # added by fleetops (handler flushes), not in the playbook
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
        name = self.name or self.include or self.module or "block"
        return f"{self.role} : {name}" if self.role else name


@dataclass
class Play:
    where: str
    name: str | None = None
    hosts: str = ""
    hosts_written: list = field(default_factory=list)   # `hosts:` as a list of patterns, as written
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
    remote_user: str | None = None
    strategy: str = "linear"                        # free runs as linear (README)
    order: str = "inventory"
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
    if key in ("strategy", "order"):
        choices = STRATEGIES if key == "strategy" else ORDERS
        if rendered not in choices:
            raise BadInput(f"'{key}' must render to one of {', '.join(choices)}, not {rendered!r}", where=where)
        setattr(play, key, rendered)
    elif key in PLAY_BOOL_KEYS:
        flag = rendered if isinstance(rendered, bool) else {
            "true": True, "yes": True, "on": True, "1": True,
            "false": False, "no": False, "off": False, "0": False, "": False}.get(str(rendered).strip().lower())
        if flag is None:
            raise BadInput(f"'{key}' must render to true or false, not {rendered!r}", where=where)
        setattr(play, key, flag)
    elif key == "serial":
        play.serial = [] if rendered in (None, "", []) else _serial_items(rendered, lambda i: where, where)
    else:
        play.max_fail_percentage = None if rendered in (None, "") else _max_fail(rendered, where)


def _play(m, base_dir: str, modules: dict, index: int, path: str, roles_path=()) -> Play:
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
    play.hosts_written = [h.strip() for h in m["hosts"]] if isinstance(m["hosts"], list) else [play.hosts]
    play.name = _want_str(m, "name", default=",".join(play.hosts_written))
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
    play.become = _want_bool(m, "become", False)
    for key, default in (("any_errors_fatal", False), ("gather_facts", True)):
        if is_template(m.get(key)):
            play.limit_templates[key] = (str(m[key]), m.value_where(key))
            setattr(play, key, default)
        else:
            setattr(play, key, _want_bool(m, key, default))
    play.tags = _want_str_list(m, "tags", split_commas=True)
    play.become_user = _want_str(m, "become_user")
    play.remote_user = _want_str(m, "remote_user")
    for key, choices, default in (("strategy", STRATEGIES, "linear"), ("order", ORDERS, "inventory")):
        if is_template(m.get(key)):
            play.limit_templates[key] = (str(m[key]), m.value_where(key))
            setattr(play, key, default)
        else:
            setattr(play, key, _want_choice(m, key, choices, default))
    ctx = _Load(modules=modules, playbook_dir=base_dir, roles_path=tuple(roles_path))
    inherited = _Inherit(tags=list(play.tags), become=play.become, become_user=play.become_user,
                         remote_user=play.remote_user, base_dir=base_dir, load=ctx)
    pre = _task_list(m, "pre_tasks", modules, inherited, handler=False) or []
    roles = _play_roles(m, inherited)
    main = _task_list(m, "tasks", modules, inherited, handler=False) or []
    post = _task_list(m, "post_tasks", modules, inherited, handler=False) or []
    # as ansible-core: handlers notified so far run after pre_tasks, after roles + tasks, and at the end
    play.tasks = pre + ([_flush(m.where)] if pre else []) + roles + main
    if post:
        play.tasks += [_flush(m.where)] + post
    own_handlers = _task_list(m, "handlers", modules, inherited, handler=True) or []
    play.handlers = ctx.handlers + own_handlers        # roles' handlers first, as ansible-core
    return play


def _want_choice(m: Mapping, key, choices, default):
    v = _want_str(m, key)
    if v is None:
        return default
    if v not in choices:
        raise BadInput(f"'{key}' must be one of {', '.join(choices)}, not {v!r}", where=m.value_where(key))
    return v


def _flush(where: str) -> Task:
    """The implicit `meta: flush_handlers` ansible-core runs between a play's sections."""
    args = Mapping({"cmd": "flush_handlers"})
    args.where = where
    return Task(where=where, module="meta", args=args, implicit=True, tags=["always"])


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
    remote_user: str | None = None
    base_dir: str = "."                  # where a relative include_tasks file is looked for first
    role: str | None = None
    role_path: str | None = None
    defaults: dict = field(default_factory=dict)
    load: Any = None                     # the play's _Load
    files: tuple = ()                    # task files being read (a loop of includes is BadInput)

    def sub(self, **changes) -> "_Inherit":
        out = _Inherit(**{**self.__dict__})
        for k, v in changes.items():
            setattr(out, k, v)
        return out


@dataclass
class _Load:
    """What reading one play needs beyond the YAML: modules, the playbook's directory, roles seen."""

    modules: dict
    playbook_dir: str
    roles_path: tuple = ()                        # ansible.cfg roles_path (else DEFAULT_ROLES_PATH)
    roles_run: set = field(default_factory=set)   # (role path, params) already in the play
    handlers: list = field(default_factory=list)  # the roles' handlers, in load order
    handler_files: set = field(default_factory=set)


def _task_list(m: Mapping, key: str, modules: dict, inherited: _Inherit, handler: bool) -> list | None:
    """The tasks under `key` of m (a play section or a block part); None when absent."""
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


def _keywords(m: Mapping, inh: _Inherit):
    """The keywords a task, block, include or role entry passes down: (inherit for what is
    inside, the entry's own 'when'/'vars' before inheritance)."""
    own_when = _want_conditions(m, "when") or []
    own_tags = _want_str_list(m, "tags", split_commas=True)
    own_vars = _want_vars(m, "vars")
    delegate = _want_str(m, "delegate_to")
    if delegate is not None and delegate.strip() not in LOCALHOST:
        raise BadInput(f"delegate_to {delegate!r} is not supported: only localhost / 127.0.0.1",
                       where=m.value_where("delegate_to"))

    def flag(key, current):
        own = _want_bool(m, key)
        return current if own is None else own
    sub = inh.sub(
        when=list(inh.when) + own_when, tags=list(dict.fromkeys(inh.tags + own_tags)),
        vars={**inh.vars, **own_vars}, become=flag("become", inh.become),
        become_user=_want_str(m, "become_user", default=inh.become_user),
        check_mode=flag("check_mode", inh.check_mode), ignore_errors=flag("ignore_errors", inh.ignore_errors),
        run_once=flag("run_once", inh.run_once),
        delegate_to=delegate.strip() if delegate is not None else inh.delegate_to,
        remote_user=_want_str(m, "remote_user", default=inh.remote_user))
    return sub, {"when": own_when, "vars": own_vars}


def include_kind(key) -> str | None:
    """'include_tasks' for `include_tasks` or `ansible.builtin.include_tasks`, ...; else None."""
    if not isinstance(key, str):
        return None
    for prefix in ("",) + _BUILTIN_PREFIXES:
        if key.startswith(prefix) and key[len(prefix):] in INCLUDE_KEYS:
            return key[len(prefix):]
    return None


def _action_form(m: Mapping, modules: dict) -> Mapping:
    """`action: copy src=a dest=b` / `action: {module: copy, ...}` / `local_action:` -> the module form."""
    keys = [k for k in ("action", "local_action") if k in m]
    if not keys:
        return m
    key = keys[0]
    if len(keys) > 1:
        raise BadInput("use either 'action' or 'local_action', not both", where=m.key_where(keys[1]))
    value, vwhere = m[key], m.value_where(key)
    if isinstance(value, str):
        name, _, rest = value.strip().partition(" ")
        args = rest.strip() or None
    elif isinstance(value, Mapping) and isinstance(value.get("module"), str):
        name = value["module"]
        args = Mapping({k: v for k, v in value.items() if k != "module"})
        args.where = value.where
        for k in args:
            args.set_where(k, value.key_where(k), value.value_where(k))
    else:
        raise BadInput(f"'{key}' must be 'MODULE ARGS' or a mapping with 'module', not {_kind(value)}",
                       where=vwhere)
    if not name or not (resolve_module(name, modules) or include_kind(name)):
        raise BadInput(f"unknown module {name!r} in '{key}'{_close(name, modules)}", where=vwhere)
    for k in m:
        if resolve_module(k, modules):
            raise BadInput(f"task has both '{key}' and module {k!r}", where=m.key_where(k))
    out = Mapping()
    out.where = m.where
    for k, v in m.items():
        if k == key:
            out[name] = args
            out.set_where(name, m.key_where(k), vwhere)
        else:
            out[k] = v
            out.set_where(k, m.key_where(k), m.value_where(k))
    if key == "local_action":
        if "delegate_to" in m:
            raise BadInput("local_action already delegates to localhost", where=m.key_where("delegate_to"))
        out["delegate_to"] = "localhost"
        out.set_where("delegate_to", m.key_where(key), vwhere)
    return out


def _task(m: Mapping, modules: dict, inh: _Inherit, handler: bool) -> Task:
    m = _action_form(m, modules)
    task = Task(where=m.where, positions={k: m.key_where(k) for k in m}, is_handler=handler)
    keys = set(TASK_KEYS)
    inc_key = next((k for k in m if include_kind(k)), None)
    extra = [k for k in m if k not in keys and k != inc_key]
    mods = [k for k in extra if resolve_module(k, modules)]
    others = [k for k in extra if k not in mods]
    is_block = "block" in m or inc_key is not None
    for k in others:
        if k in _NOT_SUPPORTED:
            raise BadInput(_NOT_SUPPORTED[k], where=m.key_where(k))
        near_key, near_mod = _close(k, TASK_KEYS), _close(k, modules)
        if mods or is_block or not isinstance(k, str):
            raise BadInput(f"unknown key {k!r} in task{near_key or near_mod}", where=m.key_where(k))
        if difflib.get_close_matches(k, TASK_KEYS, n=1, cutoff=0.8):   # a misspelt keyword, not a module
            raise BadInput(f"unknown key {k!r} in task{near_key}", where=m.key_where(k))
        raise BadInput(f"unknown module {k!r}{near_mod}", where=m.key_where(k))
    if len(mods) > 1:
        raise BadInput(f"task has two module keys: {mods[0]!r} and {mods[1]!r}", where=m.key_where(mods[1]))
    if is_block and mods:
        raise BadInput(f"a block cannot also run a module ({mods[0]!r})", where=m.key_where(mods[0]))
    if inc_key and "block" in m:
        raise BadInput(f"a block cannot also be an {include_kind(inc_key)}", where=m.key_where(inc_key))
    if not is_block:
        for k in ("rescue", "always"):
            if k in m:
                raise BadInput(f"'{k}' needs a 'block'", where=m.key_where(k))
    if not is_block and not mods:
        raise BadInput("task has no module (expected one of: " + ", ".join(sorted(modules)) + ")",
                       where=m.where)
    if is_block:
        allowed = INCLUDE_TASK_KEYS + (inc_key,) if inc_key else BLOCK_KEYS
        what = f"an {include_kind(inc_key)}" if inc_key else "a block"
        for k in m:
            if k not in allowed:
                if inc_key and k in ("loop", "with_items", "loop_control"):
                    raise BadInput(f"a loop over {what} is not supported: fleetops reads included files "
                                   "before the run (loop inside the included tasks instead)", where=m.key_where(k))
                raise BadInput(f"'{k}' is not allowed on {what}", where=m.key_where(k))
        if handler and not inc_key:
            raise BadInput("a handler cannot be a block", where=m.key_where("block"))

    task.name = _want_str(m, "name")
    sub, own = _keywords(m, inh)
    task.own.update(own)
    (task.when, task.tags, task.vars, task.become, task.become_user, task.check_mode, task.ignore_errors,
     task.run_once, task.delegate_to, task.remote_user) = (
        sub.when, sub.tags, sub.vars, sub.become, sub.become_user, sub.check_mode, sub.ignore_errors,
        sub.run_once, sub.delegate_to, sub.remote_user)
    task.role, task.role_path, task.defaults = inh.role, inh.role_path, inh.defaults

    task.action = inc_key or (mods[0] if mods else None)
    if inc_key:
        task.include = include_kind(inc_key)
        task.block = _include_block(m, inc_key, sub, handler)
        return task
    if is_block:
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
        if not isinstance(loop, list) and not is_template(loop) and not (loop_key == "with_items"
                                                                         and isinstance(loop, str)):
            raise BadInput(f"'{loop_key}' must be a list or a template giving one, not {_kind(loop)}",
                           where=m.value_where(loop_key))
        if loop_key == "with_items" and isinstance(loop, str) and not is_template(loop):
            loop = [loop]                 # ansible-core: a bare with_items string is one item
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


# ---------------------------------------------------------------- task files and roles

# where ansible-core looks for a role by name, after <playbook dir>/roles/ and <playbook dir>/
DEFAULT_ROLES_PATH = ("~/.ansible/roles", "/usr/share/ansible/roles", "/etc/ansible/roles")


def _static_name(value, what: str, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{what} must be a name, not {_kind(value)}", where=where)
    if is_template(value):
        raise BadInput(f"a templated {what} ({value!r}) is not supported: fleetops reads every task file "
                       "before the run, so name the file (use 'when' to choose)", where=where)
    return value.strip()


def _include_args(m: Mapping, key: str, free: str) -> Mapping:
    """An include's arguments: `include_tasks: f.yml` or a mapping, plus the task's `args:`."""
    value = m[key]
    args = Mapping()
    args.where = m.value_where(key)
    if isinstance(value, str):
        args[free] = value
        args.set_where(free, m.key_where(key), m.value_where(key))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            args[k] = v
            args.set_where(k, value.key_where(k), value.value_where(k))
    elif value is not None:
        raise BadInput(f"'{key}' must be a file name or a mapping, not {_kind(value)}", where=m.value_where(key))
    extra = m.get("args")
    if isinstance(extra, Mapping):
        for k, v in extra.items():
            args[k] = v
            args.set_where(k, extra.key_where(k), extra.value_where(k))
    return args


def _include_block(m: Mapping, key: str, inh: _Inherit, handler: bool) -> list:
    """The tasks an include_tasks / import_tasks / include_role / import_role stands for."""
    kind = include_kind(key)
    if kind in ("include_tasks", "import_tasks"):
        args = _include_args(m, key, "file")
        allowed = ("file", "_raw_params") + (("apply",) if kind == "include_tasks" else ())
        for k in args:
            if k not in allowed:
                raise BadInput(f"unknown argument {k!r} for {kind} (it takes: {', '.join(allowed[::2])})",
                               where=args.key_where(k))
        name = _static_name(args.get("file", args.get("_raw_params")), f"{kind} file", args.where)
        if isinstance(args.get("apply"), Mapping):
            apply = args["apply"]
            _unknown_keys(apply, BLOCK_KEYS[:-4], "apply")
            inh, _ = _keywords(apply, inh)
        path = _find_task_file(name, inh, args.where)
        return _task_file(path, inh, handler, args.where)
    args = _include_args(m, key, "name")
    for k in args:
        if k not in ("name", "allow_duplicates", "public") + ROLE_FROM_KEYS:
            raise BadInput(f"unknown argument {k!r} for {kind}", where=args.key_where(k))
    name = _static_name(args.get("name"), f"{kind} name", args.where)
    froms = {k: _static_name(args[k], k, args.value_where(k)) for k in ROLE_FROM_KEYS if k in args}
    return _role(name, inh, {}, args.where, froms, once=False)


def _find_task_file(name: str, inh: _Inherit, where: str) -> str:
    """As ansible-core: beside the including file, in the role's tasks/, then the playbook's directory."""
    name = os.path.expanduser(name)
    bases = [inh.base_dir] + ([os.path.join(inh.role_path, "tasks"), inh.role_path] if inh.role_path else [])
    bases.append(inh.load.playbook_dir)
    for base in bases:
        path = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(path):
            return path
    raise BadInput(f"task file not found: {name} (looked in {', '.join(dict.fromkeys(bases))})", where=where)


def _task_file(path: str, inh: _Inherit, handler: bool, where: str) -> list:
    """The tasks of one task file, read with the includer's keywords."""
    if path in inh.files:
        raise BadInput(f"{os.path.basename(path)} includes itself (through {' -> '.join(map(os.path.basename, inh.files))})",
                       where=where)
    data = load_yaml(path)
    if data is None:
        return []
    if not isinstance(data, Sequence):
        raise BadInput(f"a task file must be a list of tasks, not {_kind(data)}", where=getattr(data, "where", path))
    inh = inh.sub(base_dir=os.path.dirname(path), files=inh.files + (path,))
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise BadInput(f"each entry of a task file must be a task (a mapping), not {_kind(item)}",
                           where=data.item_where(i))
        out.append(_task(item, inh.load.modules, inh, handler))
    return out


def _find_role(name: str, inh: _Inherit, where: str) -> str:
    if name.count(".") >= 2 and "/" not in name:
        raise BadInput(f"role {name!r} is in a collection: collections are not supported (put the role "
                       "in roles/ beside the playbook)", where=where)
    pb = inh.load.playbook_dir
    name = os.path.expanduser(name)
    candidates = [name] if os.path.isabs(name) else (
        [os.path.join(pb, "roles", name), os.path.join(pb, name)]
        + [os.path.join(os.path.expanduser(d), name) for d in (inh.load.roles_path or DEFAULT_ROLES_PATH)])
    for c in candidates:
        if os.path.isdir(c):
            return os.path.normpath(c)
    raise BadInput(f"role {name!r} not found (looked in {', '.join(candidates)})", where=where)


def _role_file(role_path: str, sub: str, name: str) -> str | None:
    base = os.path.join(role_path, sub, name)
    for cand in ((base,) if os.path.splitext(name)[1] else (base + ".yml", base + ".yaml", base)):
        if os.path.isfile(cand):
            return cand
    return None


def _role_vars_file(role_path: str, sub: str, name: str, where: str, required: bool) -> dict:
    path = _role_file(role_path, sub, name)
    if path is None:
        if required:
            raise BadInput(f"role {os.path.basename(role_path)}: {sub}/{name} not found", where=where)
        return {}
    data = load_yaml(path)
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise BadInput(f"a role's {sub} file must be a mapping of variable names to values", where=data.where)
    check_var_names(data)
    return data


def _role(name: str, inh: _Inherit, params: dict, where: str, froms: dict, once: bool = True,
          entry_vars: dict | None = None, parent: str | None = None) -> list:
    """A role's tasks (its meta dependencies first), with its defaults, vars and params; its handlers
    join the play's. As ansible-core, a role listed twice with the same params runs once (`roles:`)."""
    path = _find_role(name, inh, where)
    meta_path = _role_file(path, "meta", "main")
    meta = load_yaml(meta_path) if meta_path else None
    meta = meta if isinstance(meta, Mapping) else Mapping()
    key = (path, repr(sorted(params.items())), repr(sorted(froms.items())), repr(sorted((entry_vars or {}).items())), parent)
    if once and key in inh.load.roles_run and not meta.get("allow_duplicates"):
        return []
    inh.load.roles_run.add(key)
    role_name = os.path.basename(path)
    defaults = _role_vars_file(path, "defaults", froms.get("defaults_from", "main"), where,
                               "defaults_from" in froms)
    role_vars = _role_vars_file(path, "vars", froms.get("vars_from", "main"), where, "vars_from" in froms)
    out: list = []
    deps = meta.get("dependencies") or []
    if not isinstance(deps, list):
        raise BadInput("'dependencies' must be a list of roles", where=meta.value_where("dependencies"))
    for i, dep in enumerate(deps):
        out += _role_entry(dep, inh, deps.item_where(i) if isinstance(deps, Sequence) else meta.where,
                           parent=path)   # a dependency runs once per role that depends on it
    rinh = inh.sub(vars={**inh.vars, **role_vars, **params}, defaults={**inh.defaults, **defaults},
                   role=role_name, role_path=path, base_dir=os.path.join(path, "tasks"))
    tasks_path = _role_file(path, "tasks", froms.get("tasks_from", "main"))
    if tasks_path is None and "tasks_from" in froms:
        raise BadInput(f"role {role_name}: tasks/{froms['tasks_from']} not found", where=where)
    if tasks_path:
        out += _task_file(tasks_path, rinh, False, where)
    handlers_path = _role_file(path, "handlers", froms.get("handlers_from", "main"))
    if handlers_path and handlers_path not in inh.load.handler_files:
        inh.load.handler_files.add(handlers_path)
        for h in _task_file(handlers_path, rinh, True, where):
            if h.name:                    # `notify: "role : handler"` names it too, as in Ansible
                h.listen = list(h.listen) + [f"{role_name} : {h.name}"]
            inh.load.handlers.append(h)
    return out


def _role_entry(entry, inh: _Inherit, where: str, parent: str | None = None) -> list:
    """One `roles:` (or meta `dependencies:`) item: a name, or a mapping of role, keywords and params."""
    if isinstance(entry, str):
        return _role(_static_name(entry, "role name", where), inh, {}, where, {}, parent=parent)
    if not isinstance(entry, Mapping):
        raise BadInput(f"a role entry must be a name or a mapping, not {_kind(entry)}", where=where)
    name_key = "role" if "role" in entry else "name"
    name = _static_name(entry.get(name_key), "role name", entry.where)
    sub, own = _keywords(entry, inh)
    params = {k: v for k, v in entry.items() if k not in ROLE_ENTRY_KEYS}
    check_var_names(Mapping(params))
    return _role(name, sub, params, entry.where, {}, entry_vars=own["vars"], parent=parent)


def _play_roles(m: Mapping, inh: _Inherit) -> list:
    raw = m.get("roles")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadInput(f"'roles' must be a list of roles, not {_kind(raw)}", where=m.value_where("roles"))
    out: list = []
    for i, entry in enumerate(raw):
        out += _role_entry(entry, inh, raw.item_where(i))
    return out


# ---------------------------------------------------------------- entry point

def load_playbook(path: str, modules: dict[str, type], roles_path=()) -> Playbook:
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
        book.plays.append(_play(item, base, modules, i, str(path), roles_path))
    return book


def walk_tasks(tasks):
    """Every task in a list, depth first, blocks included (block, rescue, always)."""
    for t in tasks or ():
        yield t
        if t.is_block:
            yield from walk_tasks(t.block)
            yield from walk_tasks(t.rescue)
            yield from walk_tasks(t.always)
