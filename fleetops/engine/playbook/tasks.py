"""One task (module, block, or include) from its YAML mapping: keys sorted into
keywords and the module, the `action:` forms, loops and conditions."""
from __future__ import annotations

import difflib
from typing import Any, cast

from fleetops.engine.playbook.args import check_args, module_args, resolve_module
from fleetops.engine.playbook.checks import (close, is_template, kind, want_bool, want_conditions,
                                             want_int_or_template, want_name, want_str, want_str_list)
from fleetops.engine.playbook.dynamic import DynamicInclude, candidate_tasks, read_included
from fleetops.engine.playbook.includes import import_name, include_args
from fleetops.engine.playbook.withloop import WithLoop, with_key, with_keys
from fleetops.engine.playbook.keywords import (ASYNC_MODULES, BLOCK_KEYS, DEFAULT_POLL, DYNAMIC, LOOP_KEYS, INCLUDE_TASK_KEYS, LOOP_CONTROL_KEYS, NOT_SUPPORTED,
                                               ROLE_FROM_KEYS, TASK_KEYS, Inherit, include_kind,
                                               inherit_keywords, unknown_keys)
from fleetops.engine.playbook.model import Task
from fleetops.engine.yamlsrc import Mapping, Sequence
from fleetops.errors import BadInput


def task_list(m: Mapping, key: str, modules: dict, inherited: Inherit, handler: bool) -> list | None:
    """The tasks under `key` of m (a play section or a block part); None when absent."""
    if key not in m or m[key] is None:
        return [] if key in ("tasks", "handlers") else None
    raw = m[key]
    if not isinstance(raw, list):
        raise BadInput(f"'{key}' must be a list of tasks, not {kind(raw)}", where=m.value_where(key))
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise BadInput(f"each entry of '{key}' must be a task (a mapping), not {kind(item)}",
                           where=cast(Sequence, raw).item_where(i))
        out.append(build_task(item, modules, inherited, handler))
    return out


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
        args: Any = rest.strip() or None
    elif isinstance(value, Mapping) and isinstance(value.get("module"), str):
        name = value["module"]
        args = Mapping({k: v for k, v in value.items() if k != "module"})
        args.where = value.where
        for k in args:
            args.set_where(k, value.key_where(k), value.value_where(k))
    else:
        raise BadInput(f"'{key}' must be 'MODULE ARGS' or a mapping with 'module', not {kind(value)}",
                       where=vwhere)
    if not name or not (resolve_module(name, modules) or include_kind(name)):
        raise BadInput(f"unknown module {name!r} in '{key}'{close(name, modules)}", where=vwhere)
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


def build_task(m: Mapping, modules: dict, inh: Inherit, handler: bool) -> Task:
    m = _action_form(m, modules)
    task = Task(where=m.where, positions={k: m.key_where(k) for k in m}, is_handler=handler)
    keys = set(TASK_KEYS) | set(with_keys())
    inc_key = next((k for k in m if include_kind(k)), None)
    extra = [k for k in m if k not in keys and k != inc_key]
    mods = [k for k in extra if resolve_module(k, modules)]
    others = [k for k in extra if k not in mods]
    is_block = "block" in m or inc_key is not None
    for k in others:
        if k in NOT_SUPPORTED:
            raise BadInput(NOT_SUPPORTED[k], where=m.key_where(k))
        near_key, near_mod = close(k, TASK_KEYS), close(k, modules)
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
    if handler and include_kind(inc_key) in ("include_role", "import_role"):
        raise BadInput(f"using '{include_kind(inc_key)}' as a handler is not supported (nor in ansible-core): "
                       "notify a handler of the role, or an include_tasks of its tasks file", where=m.where)
    if is_block:
        allowed: tuple = INCLUDE_TASK_KEYS + (inc_key,) if inc_key else BLOCK_KEYS
        if include_kind(inc_key) in DYNAMIC:
            allowed += LOOP_KEYS + with_keys() + ("register",) + (("listen",) if handler else ())
        what = f"an {include_kind(inc_key)}" if inc_key else "a block"
        for k in m:
            if k not in allowed:
                if inc_key and k in LOOP_KEYS:
                    raise BadInput(f"a loop over {what} is not possible: an import is read once, before the "
                                   f"run (use {what[3:].replace('import', 'include')} to loop)", where=m.key_where(k))
                raise BadInput(f"'{k}' is not allowed on {what}", where=m.key_where(k))
        if handler and not inc_key:
            raise BadInput("a handler cannot be a block", where=m.key_where("block"))

    task.name = want_str(m, "name")
    sub, own = inherit_keywords(m, inh)
    task.own.update(own)
    (task.when, task.tags, task.vars, task.become, task.become_user, task.check_mode, task.ignore_errors,
     task.run_once, task.delegate_to, task.remote_user, task.connection, task.environment, task.no_log) = (
        sub.when, sub.tags, sub.vars, sub.become, sub.become_user, sub.check_mode, sub.ignore_errors,
        sub.run_once, sub.delegate_to, sub.remote_user, sub.connection, sub.environment, sub.no_log)
    task.role, task.role_path, task.defaults = inh.role, inh.role_path, inh.defaults

    task.action = inc_key or (mods[0] if mods else None)
    if inc_key:
        task.include = include_kind(inc_key)
        if task.include in DYNAMIC:
            _loop(m, task)
            task.register = want_name(m, "register")
        if task.include in DYNAMIC and handler:     # notified as a whole, by its name or a topic
            task.listen = want_str_list(m, "listen")
            if not (task.name or task.listen):
                raise BadInput("a handler needs a 'name' (or 'listen') to be notified by", where=m.where)
        dyn = include_block(m, inc_key, sub, handler, dynamic=True, outer=sub.sub(when=list(inh.when)))
        if isinstance(dyn, DynamicInclude):
            task.dynamic = dyn
            if not dyn.templated:
                try:
                    task.block = read_included(dyn.kind, dyn.name, dyn.froms, dyn.inherit, dyn.handler, dyn.where,
                                               dyn.public)
                except BadInput as exc:
                    if not handler:
                        raise
                    task.block, task.unread = [], exc   # as ansible-core: a handler's file is read when it runs
            if dyn.templated:
                dyn.candidates = candidate_tasks(dyn)
        else:
            task.block = dyn
        return task
    if is_block:
        task.block = task_list(m, "block", modules, sub, handler)
        task.rescue = task_list(m, "rescue", modules, sub, handler)
        task.always = task_list(m, "always", modules, sub, handler)
        if not task.block:
            raise BadInput("'block' is empty", where=m.key_where("block"))
        return task

    key = mods[0]
    task.module = resolve_module(key, modules)
    task.positions.setdefault(task.module, m.key_where(key))
    task.args = module_args(m, key, task.module, modules[task.module], m.key_where(key))
    _loop(m, task)
    _async(m, task)
    task.register = want_name(m, "register")
    task.delegate_facts = bool(want_bool(m, "delegate_facts", False))
    if task.delegate_facts and task.delegate_to is None:
        raise BadInput("delegate_facts needs a delegate_to", where=m.key_where("delegate_facts"))
    task.until = want_conditions(m, "until")
    task.retries = want_int_or_template(m, "retries")
    if task.until is not None and task.retries is None:
        task.retries = 3
    task.delay = (m["delay"] if isinstance(m.get("delay"), float) and m["delay"] >= 0   # delay: 0.01
                  else want_int_or_template(m, "delay", default=5))
    task.failed_when = want_conditions(m, "failed_when")
    task.changed_when = want_conditions(m, "changed_when")
    task.notify = want_str_list(m, "notify")
    task.listen = want_str_list(m, "listen")
    if task.listen and not handler:
        raise BadInput("'listen' is only for handlers", where=m.key_where("listen"))
    if handler and not (task.name or task.listen):
        raise BadInput("a handler needs a 'name' (or 'listen') to be notified by", where=m.where)
    check_args(task, modules)
    if handler and task.module == "meta" and task.args.get("cmd") == "flush_handlers":
        raise BadInput("flush_handlers cannot be used as a handler (as in ansible-core)", where=m.key_where(key))
    return task


def _async(m: Mapping, task: Task) -> None:
    """`async:` / `poll:`: on the modules whose host work is one command line (ASYNC_MODULES)."""
    task.async_val = want_int_or_template(m, "async", default=0)
    task.poll = want_int_or_template(m, "poll", default=DEFAULT_POLL)
    if "poll" in m and "async" not in m:
        raise BadInput("'poll' needs 'async' (the job's time limit in seconds)", where=m.key_where("poll"))
    if task.async_val and task.module not in ASYNC_MODULES:
        raise BadInput(f"async is supported on {' and '.join(ASYNC_MODULES)} only, not {task.module!r}: "
                       "fleetops runs other modules' host work in several steps", where=m.key_where("async"))


def _loop(m: Mapping, task: Task) -> None:
    """`loop` / `with_items` and `loop_control` of a module task or a dynamic include."""
    looped = [k for k in ("loop", "with_items", with_key(m)) if k and k in m]
    if len(looped) > 1:
        raise BadInput(f"use either '{looped[0]}' or '{looped[1]}', not both", where=m.key_where(looped[1]))
    if looped and looped[0] not in ("loop", "with_items"):
        task.loop = WithLoop({"with": looped[0][5:], "terms": m[looped[0]]})
        task.positions.setdefault("loop", m.key_where(looped[0]))
    loop_key = "loop" if "loop" in m else ("with_items" if "with_items" in m else None)
    if loop_key:
        loop = m[loop_key]
        if not isinstance(loop, list) and not is_template(loop) and not (loop_key == "with_items"
                                                                         and isinstance(loop, str)):
            raise BadInput(f"'{loop_key}' must be a list or a template giving one, not {kind(loop)}",
                           where=m.value_where(loop_key))
        if loop_key == "with_items" and isinstance(loop, str) and not is_template(loop):
            loop = [loop]                 # ansible-core: a bare with_items string is one item
        task.loop = loop
        if loop_key == "with_items":      # the items lookup: taskrun flattens its list one level
            task.own["loop_with"] = "items"
            task.positions.setdefault("loop", m.key_where("with_items"))
    lc = m.get("loop_control")
    if lc is not None:
        if not isinstance(lc, Mapping):
            raise BadInput(f"'loop_control' must be a mapping, not {kind(lc)}",
                           where=m.value_where("loop_control"))
        unknown_keys(lc, LOOP_CONTROL_KEYS, "loop_control")
        task.loop_var = want_name(lc, "loop_var") or "item"
        task.loop_label = lc.get("label")
        want_name(lc, "index_var")
        task.own["loop_control"] = {k: lc[k] for k in LOOP_CONTROL_KEYS[2:] if k in lc}


def include_block(m: Mapping, key: str, inh: Inherit, handler: bool, dynamic: bool = False,
                  outer: Inherit | None = None):
    """The tasks an include_tasks / import_tasks / include_role / import_role stands for; a
    DynamicInclude for an include_* that loops (`dynamic`) or whose name is a template: read per
    host when reached, its tasks inheriting `outer` (the include's keywords but its own `when`)."""
    what = cast(str, include_kind(key))     # called for include keys only
    if what in ("include_tasks", "import_tasks"):
        args = include_args(m, key, "file")
        allowed = ("file", "_raw_params") + (("apply",) if what == "include_tasks" else ())
        for k in args:
            if k not in allowed:
                raise BadInput(f"unknown argument {k!r} for {what} (it takes: {', '.join(allowed[::2])})",
                               where=args.key_where(k))
        raw = args.get("_raw_params", args.get("file"))
        dynamic = what in DYNAMIC and dynamic
        name = str(raw).strip() if dynamic and is_template(raw) else import_name(raw, f"{what} file", args.where, inh)
        base = outer if dynamic and outer is not None else inh
        if isinstance(args.get("apply"), Mapping):
            apply = args["apply"]
            unknown_keys(apply, BLOCK_KEYS[:-4], "apply")
            base, _ = inherit_keywords(apply, base)
        # an included handler file's tasks run as one handler, nameless or not; imported ones are handlers
        handler = handler and what not in DYNAMIC
        if dynamic:
            return DynamicInclude(what, name, {}, False, base, handler, args.where)
        return read_included(what, name, {}, base, handler, args.where)
    args = include_args(m, key, "name")
    for k in args:
        if k not in ("name", "allow_duplicates", "public") + ROLE_FROM_KEYS:
            raise BadInput(f"unknown argument {k!r} for {what}", where=args.key_where(k))
    raw_froms = {k: args[k] for k in ROLE_FROM_KEYS if k in args}
    dynamic = what in DYNAMIC and dynamic and not handler
    keep = is_template if dynamic else (lambda _v: False)
    name = args["name"].strip() if keep(args.get("name")) else import_name(args.get("name"), f"{what} name",
                                                                            args.where, inh)
    froms = {k: v.strip() if keep(v) else import_name(v, k, args.value_where(k), inh) for k, v in raw_froms.items()}
    public = args.get("public")
    if public is not None and not isinstance(public, bool):
        raise BadInput(f"'public' must be true or false, not {kind(public)}", where=args.value_where("public"))
    if dynamic and public and (is_template(name) or any(is_template(v) for v in froms.values())):
        raise BadInput("a templated include_role with 'public: true' is not supported: the role's vars and "
                       "defaults reach the play when it is read, before the run; name the role (or use "
                       "import_role)", where=args.value_where("public"))
    if dynamic:
        return DynamicInclude(what, name, froms, bool(public), outer if outer is not None else inh, handler,
                              args.where)
    return read_included(what, name, froms, inh, handler, args.where, bool(public))
