"""Module arguments of a task: the free form, `k=v` strings and `args:` merged,
then checked against the module's declared `args`."""
from __future__ import annotations

from fleetops.engine.boolean import parse_bool
from fleetops.engine.playbook.checks import IDENT, close, is_template, kind
from fleetops.engine.playbook.keywords import BUILTIN_PREFIXES
from fleetops.engine.playbook.model import Task
from fleetops.engine.yamlsrc import Mapping
from fleetops.errors import BadInput


def resolve_module(name, modules: dict) -> str | None:
    """The registry name for a task key (accepts `ansible.builtin.X`), or None."""
    if not isinstance(name, str):
        return None
    if name in modules:
        return name
    for prefix in BUILTIN_PREFIXES:
        if name.startswith(prefix) and name[len(prefix):] in modules:
            return name[len(prefix):]
    return None


def split_kv(text: str, where: str | None) -> list[str]:
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


def _parse_kv(text: str, where: str | None) -> dict:
    out = {}
    for tok in split_kv(text, where):
        key, eq, value = tok.partition("=")
        if not eq or not (IDENT.match(key) or is_template(key)):   # set_fact: "{{ item }}=moo"
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
    if bool in types_ and parse_bool(value) is not None:
        return parse_bool(value)
    for t in (int, float):
        if t in types_:
            try:
                return t(value)
            except ValueError:
                pass
    return value


def module_args(m: Mapping, key: str, mod_name: str | None, mod_cls, where_key: str | None) -> Mapping:
    """Build the task's args (free form -> cmd, k=v strings, the `args:` key merged)."""
    value = m[key]
    args = Mapping()
    args.where = m.value_where(key)
    spec = mod_cls.args or {}
    if isinstance(value, dict):
        for k, v in value.items():
            args[k] = v
            args.set_where(k, value.key_where(k) if isinstance(value, Mapping) else where_key,
                           value.value_where(k) if isinstance(value, Mapping) else None)
    elif isinstance(value, str) and mod_cls.free_form:
        args["cmd"] = value
        args.set_where("cmd", where_key, m.value_where(key))
    elif isinstance(value, str):
        for k, v in _parse_kv(value, m.value_where(key)).items():
            args[k] = _coerce_kv(v, spec[k].type) if k in spec else v
            args.set_where(k, where_key, m.value_where(key))
    elif value is not None:
        raise BadInput(f"arguments of module '{mod_name}' must be a mapping"
                       f"{' or a command string' if mod_cls.free_form else ''}, "
                       f"not {kind(value)}", where=m.value_where(key))
    extra = m.get("args")
    if extra is not None:
        if not isinstance(extra, dict):
            raise BadInput(f"'args' must be a mapping, not {kind(extra)}", where=m.value_where("args"))
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
    spec = mod_cls.args or {}
    args = task.args
    kw = args.key_where if isinstance(args, Mapping) else (lambda k: task.key_where(task.module))
    vw = args.value_where if isinstance(args, Mapping) else kw
    allow_cmd = mod_cls.free_form
    any_args = mod_cls.any_args   # set_fact: every other key is a variable name
    for k, v in args.items():
        if isinstance(k, str) and k.startswith("_ansible_") and not allow_cmd:
            raise BadInput(f"argument {k!r} of module '{task.module}': the prefix '_ansible_' is reserved "
                           "for ansible-core's internal use", where=kw(k))
        if any_args and k not in spec:
            if not isinstance(k, str) or not (IDENT.match(k) or is_template(k)):   # a templated name: run time
                raise BadInput(f"invalid variable name {k!r} for module '{task.module}' "
                               "(letters, digits and _ only)", where=kw(k))
            continue
        if k not in spec and not (allow_cmd and k == "cmd"):
            raise BadInput(f"unknown argument {k!r} for module '{task.module}'"
                           f"{close(k, spec) or (' (it takes: ' + ', '.join(sorted(spec)) + ')' if spec else ' (it takes no arguments)')}",
                           where=kw(k))
        if k not in spec or v is None or _has_template(v):
            continue
        a = spec[k]
        if not _type_ok(v, a.type):
            raise BadInput(f"argument {k!r} of module '{task.module}' must be {_type_names(a.type)}, "
                           f"not {kind(v)}", where=vw(k))
        if a.choices is not None and v not in a.choices:
            raise BadInput(f"argument {k!r} of module '{task.module}' must be one of "
                           f"{', '.join(map(str, a.choices))}, not {v!r}", where=vw(k))
    for k, a in spec.items():
        if a.required and args.get(k) is None:
            raise BadInput(f"module '{task.module}' needs argument {k!r}",
                           where=task.key_where(task.module))
