"""A play and the playbook: play keywords (serial, limits, strategy), its sections
(pre_tasks, roles, tasks, post_tasks, handlers) in the order ansible-core runs them.

Everything a playbook can get wrong without knowing hosts or variables is
caught when it is loaded, each as one BadInput naming the exact file:line:column,
so nothing is half-run."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import cast

from fleetops.engine.boolean import parse_bool
from fleetops.engine.playbook.checks import (IDENT, is_template, kind, want_bool, want_bool_or_template,
                                             want_conditions, want_environment, want_str, want_str_list, want_vars)
from fleetops.engine.playbook.keywords import (BUILTIN_PREFIXES, ORDERS, PLAY_BOOL_KEYS, PLAY_KEYS, STRATEGIES,
                                               Inherit, Load, unknown_keys, want_connection)
from fleetops.engine.playbook.model import Play, Playbook, Task, handler_list, walk_tasks
from fleetops.engine.playbook.roles import play_roles
from fleetops.engine.playbook.tasks import build_task, task_list
from fleetops.engine.yamlsrc import Mapping, Sequence, load_yaml
from fleetops.errors import BadInput

_PERCENT = re.compile(r"\A\s*(\d+(?:\.\d+)?)\s*%\s*\Z")


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


def _serial_items(raw, where_of, where_all: str | None) -> list:
    """serial as a checked list; where_of(i) locates item i in errors, where_all the whole value."""
    items = raw if isinstance(raw, list) else [raw]
    out: list = []
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


def _max_fail(mfp, where: str | None) -> float:
    if isinstance(mfp, str):
        try:
            mfp = float(mfp.strip().rstrip("%"))
        except ValueError:
            pass
    if isinstance(mfp, bool) or not isinstance(mfp, (int, float)) or not 0 <= mfp <= 100:
        raise BadInput(f"'max_fail_percentage' must be a number from 0 to 100, not {mfp!r}", where=where)
    return float(mfp)


def set_limit(play: Play, key: str, rendered) -> None:
    """Set a templated play keyword (hosts, serial, max_fail_percentage, strategy, order, a play
    boolean) from its rendered value, checked as the literal forms are; a bad value is a
    BadInput at the template's line."""
    where = play.limit_templates[key][1]
    if key in ("strategy", "order"):
        choices = STRATEGIES if key == "strategy" else ORDERS
        if rendered not in choices:
            raise BadInput(f"'{key}' must render to one of {', '.join(choices)}, not {rendered!r}", where=where)
        setattr(play, key, rendered)
    elif key in PLAY_BOOL_KEYS:
        flag = False if rendered == "" else parse_bool(rendered)
        if flag is None:
            raise BadInput(f"'{key}' must render to true or false, not {rendered!r}", where=where)
        setattr(play, key, flag)
    elif key == "hosts":
        items = [i for r in (rendered if isinstance(rendered, list) else [rendered])
                 for i in (r if isinstance(r, list) else [r])]
        if not items or not all(isinstance(h, str) and h.strip() for h in items):
            raise BadInput(f"'hosts' must render to a host pattern, not {rendered!r}", where=where)
        written = [h.strip() for h in items]
        if play.name == ",".join(play.hosts_written):     # the default name is the pattern, rendered
            play.name = ",".join(written)
        play.hosts, play.hosts_written = ":".join(written), written
    elif key == "serial":
        play.serial = [] if rendered in (None, "", []) else _serial_items(rendered, lambda i: where, where)
    else:
        play.max_fail_percentage = None if rendered in (None, "") else _max_fail(rendered, where)


def build_play(m, base_dir: str, modules: dict, index: int, path: str, roles_path=(), outer=None) -> Play:
    if not isinstance(m, Mapping):
        raise BadInput(f"play #{index + 1} must be a mapping, not {kind(m)}",
                       where=getattr(m, "where", None) or path)
    unknown_keys(m, PLAY_KEYS, "play")
    play = Play(where=m.where, positions={k: m.key_where(k) for k in m})
    if "hosts" not in m or m["hosts"] is None:
        raise BadInput("play has no 'hosts'", where=m.where)
    hosts = m["hosts"]
    if isinstance(hosts, list):
        for i, h in enumerate(hosts):
            if not isinstance(h, str) or not h.strip():
                raise BadInput(f"'hosts' items must be host patterns, not {kind(h)}",
                               where=cast(Sequence, hosts).item_where(i))
        hosts = ":".join(h.strip() for h in hosts)
    if not isinstance(hosts, str) or not hosts.strip():
        raise BadInput(f"'hosts' must be a host pattern, not {kind(hosts)}", where=m.value_where("hosts"))
    if is_template(hosts):   # rendered by validate() from play vars, vars_files, -e and groups
        raw = [h.strip() for h in m["hosts"]] if isinstance(m["hosts"], list) else hosts.strip()
        play.limit_templates["hosts"] = (raw, m.value_where("hosts"))
    play.hosts = hosts.strip()
    play.hosts_written = [h.strip() for h in m["hosts"]] if isinstance(m["hosts"], list) else [play.hosts]
    play.name = want_str(m, "name", default=",".join(play.hosts_written))
    play.vars = want_vars(m, "vars")
    _vars_prompt(m, play)
    raw_files = m.get("vars_files")
    if raw_files is not None:
        items = raw_files if isinstance(raw_files, list) else [raw_files]
        for i, f in enumerate(items):
            where = raw_files.item_where(i) if isinstance(raw_files, Sequence) else m.value_where("vars_files")
            choices = f if isinstance(f, list) else [f]    # a list: the first of its files that exists
            for c in choices:
                if not isinstance(c, str) or not c.strip():
                    raise BadInput(f"'vars_files' items must be file paths or lists of them, not {kind(c)}",
                                   where=where)
                if is_template(c):
                    raise BadInput("a templated vars_files path is not supported (include_vars takes one, "
                                   "read per host)", where=where)
            paths = [os.path.join(base_dir, os.path.expanduser(c)) for c in choices]
            found = next((p for p in paths if os.path.isfile(p)), None)
            if found is None and len(paths) > 1:
                raise BadInput(f"none of the vars_files alternatives exists: {', '.join(choices)}", where=where)
            play.vars_files.append(found or paths[0])
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
    play.become = want_bool(m, "become", False)
    for key, default in (("any_errors_fatal", False), ("gather_facts", True)):
        if is_template(m.get(key)):
            play.limit_templates[key] = (str(m[key]), m.value_where(key))
            setattr(play, key, default)
        else:
            setattr(play, key, want_bool(m, key, default))
    play.tags = want_str_list(m, "tags", split_commas=True)
    if outer is not None:
        play.tags = list(dict.fromkeys(play.tags + outer.tags))
        play.vars = _merged(play.vars, outer.vars)
    play.become_user = want_str(m, "become_user")
    play.remote_user = want_str(m, "remote_user")
    play.connection = want_connection(m)
    play.environment = want_environment(m)
    for word, allowed, fallback in (("strategy", STRATEGIES, "linear"), ("order", ORDERS, "inventory")):
        if is_template(m.get(word)):
            play.limit_templates[word] = (str(m[word]), m.value_where(word))
            setattr(play, word, fallback)
        else:
            setattr(play, word, _want_choice(m, word, allowed, fallback))
    ctx = Load(modules=modules, playbook_dir=base_dir, build_task=build_task, roles_path=tuple(roles_path),
               play_vars=dict(play.vars))
    play.base_dir = base_dir
    inherited = Inherit(tags=list(play.tags), become=play.become, become_user=play.become_user,
                        remote_user=play.remote_user, connection=play.connection, base_dir=base_dir, load=ctx,
                        environment=list(play.environment), no_log=want_bool_or_template(m, "no_log", False))
    for_handlers = inherited
    if outer is not None and outer.when:     # an import's `when` guards the tasks, not the handlers
        inherited = inherited.sub(when=list(outer.when))
    pre = task_list(m, "pre_tasks", modules, inherited, handler=False) or []
    roles = play_roles(m, inherited)
    main = task_list(m, "tasks", modules, inherited, handler=False) or []
    post = task_list(m, "post_tasks", modules, inherited, handler=False) or []
    # as ansible-core: handlers notified so far run after pre_tasks, after roles + tasks, and at the end
    play.tasks = pre + ([_flush(m.where)] if pre else []) + roles + main
    if post:
        play.tasks += [_flush(m.where)] + post
    own_handlers = handler_list(task_list(m, "handlers", modules, for_handlers, handler=True) or [])
    play.handlers = ctx.handlers + own_handlers        # roles' handlers first, as ansible-core
    play.role_var_files = ctx.var_files
    if ctx.exported:                                   # role vars above play vars, below block/task vars
        role_vars = _merged(*[v for v, _ in ctx.exported])
        role_defaults = _merged(*[d for _, d in ctx.exported])
        for t in walk_tasks(list(play.tasks) + list(play.handlers)):
            t.vars = _merged(role_vars, t.vars)
            t.defaults = _merged(role_defaults, t.defaults)
    return play


PROMPT_KEYS = ("name", "prompt", "default", "private", "confirm", "unsafe")


def _vars_prompt(m: Mapping, play: Play) -> None:
    """vars_prompt, for a run that never stops to ask: -e gives the answer, else the default
    (set as a play variable); a name with neither is refused by validation, at its line."""
    raw = m.get("vars_prompt")
    if raw is None:
        return
    if not isinstance(raw, list):
        raise BadInput(f"'vars_prompt' must be a list of prompts, not {kind(raw)}", where=m.value_where("vars_prompt"))
    for i, entry in enumerate(raw):
        where = raw.item_where(i) if isinstance(raw, Sequence) else m.value_where("vars_prompt")
        if not isinstance(entry, Mapping):
            raise BadInput(f"a vars_prompt entry must be a mapping with 'name', not {kind(entry)}", where=where)
        for k in entry:
            if k in ("encrypt", "salt", "salt_size"):
                raise BadInput(f"vars_prompt '{k}' is not supported: pass the hashed value with -e",
                               where=entry.key_where(k))
        unknown_keys(entry, PROMPT_KEYS, "vars_prompt")
        name = want_str(entry, "name")
        if name is None or not IDENT.match(name):
            raise BadInput(f"a vars_prompt entry needs a 'name' that is a variable name, not {name!r}",
                           where=entry.value_where("name") if "name" in entry else entry.where)
        if entry.get("default") is not None:
            play.vars = _merged(play.vars, Mapping({name: entry["default"]}))
            if isinstance(play.vars, Mapping):
                play.vars.set_where(name, entry.key_where("default"), entry.value_where("default"))
        else:
            play.prompts.append((name, entry.where))


def _want_choice(m: Mapping, key, choices, default):
    v = want_str(m, key)
    if v is None:
        return default
    if v not in choices:
        raise BadInput(f"'{key}' must be one of {', '.join(choices)}, not {v!r}", where=m.value_where(key))
    return v


def _flush(where: str | None) -> Task:
    """The implicit `meta: flush_handlers` ansible-core runs between a play's sections."""
    args = Mapping({"cmd": "flush_handlers"})
    args.where = where
    return Task(where=where, module="meta", args=args, implicit=True, tags=["always"])


IMPORT_PLAYBOOK_KEYS = ("name", "tags", "vars", "when")


@dataclass
class _Imported:
    """What an `import_playbook` entry gives every play of the file it imports (as ansible-core:
    its tags join each play's, its vars win over the play's, its `when` guards each task)."""

    tags: list = field(default_factory=list)
    vars: dict = field(default_factory=dict)
    when: list = field(default_factory=list)
    files: tuple = ()                     # the playbooks being read (an import loop is BadInput)


def _merged(*parts) -> Mapping:
    """Variable mappings merged left to right, each key keeping the position it was written at."""
    out = Mapping()
    for part in parts:
        for k, v in part.items():
            out[k] = v
            if isinstance(part, Mapping):
                out.set_where(k, part.key_where(k), part.value_where(k))
    out.where = getattr(parts[0], "where", None)
    return out


def load_playbook(path: str, modules: dict[str, type], roles_path=()) -> Playbook:
    """Load and check a playbook file: a list of plays and `import_playbook` entries.
    Raises BadInput with file:line:col."""
    book = Playbook(path=str(path))
    book.plays = _plays(str(path), modules, tuple(roles_path), _Imported(files=(os.path.abspath(path),)))
    return book


def _plays(path: str, modules: dict, roles_path: tuple, outer: _Imported, where: str | None = None) -> list:
    data = load_yaml(path)
    if data is None:
        raise BadInput("the playbook is empty", where=where or path)
    if isinstance(data, Mapping):
        raise BadInput("a playbook must be a list of plays (start each play with '- hosts: ...')",
                       where=data.where)
    if not isinstance(data, Sequence):
        raise BadInput(f"a playbook must be a list of plays, not {kind(data)}", where=where or path)
    if not data:
        raise BadInput("the playbook has no plays", where=data.where)
    base = os.path.dirname(os.path.abspath(path))
    plays: list = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise BadInput(f"play #{i + 1} must be a mapping, not {kind(item)}", where=data.item_where(i))
        key = next((k for k in item if isinstance(k, str) and k in ("import_playbook",)
                    + tuple(p + "import_playbook" for p in BUILTIN_PREFIXES)), None)
        if key is not None:
            plays += _import_playbook(item, key, base, modules, roles_path, outer)
        else:
            plays.append(build_play(item, base, modules, i, path, roles_path, outer))
    return plays


def _import_playbook(m: Mapping, key: str, base: str, modules: dict, roles_path: tuple,
                     outer: _Imported) -> list:
    """The plays of the playbook an `import_playbook` entry names, read now with its keywords."""
    unknown_keys(m, (key,) + IMPORT_PLAYBOOK_KEYS, "import_playbook")
    name = m[key]
    if not isinstance(name, str) or not name.strip():
        raise BadInput(f"import_playbook must be a playbook file name, not {kind(name)}", where=m.value_where(key))
    if is_template(name):
        raise BadInput(f"a templated import_playbook ({name!r}) is not supported: fleetops reads every playbook "
                       "before the run, so name the file", where=m.value_where(key))
    if name.count(".") >= 2 and "/" not in name and not name.endswith((".yml", ".yaml")):
        raise BadInput(f"playbook {name!r} is in a collection: collections are not supported",
                       where=m.value_where(key))
    path = os.path.normpath(os.path.join(base, os.path.expanduser(name.strip())))
    if not os.path.isfile(path):
        raise BadInput(f"playbook not found: {name} (looked in {base})", where=m.value_where(key))
    if path in outer.files:
        raise BadInput(f"{os.path.basename(path)} imports itself (through "
                       f"{' -> '.join(map(os.path.basename, outer.files))})", where=m.value_where(key))
    inner = _Imported(tags=list(dict.fromkeys(outer.tags + want_str_list(m, "tags", split_commas=True))),
                      vars=_merged(outer.vars, want_vars(m, "vars")),
                      when=outer.when + (want_conditions(m, "when") or []), files=outer.files + (path,))
    return _plays(path, modules, roles_path, inner, where=m.value_where(key))
