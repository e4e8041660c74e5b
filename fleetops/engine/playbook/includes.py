"""Task files: where an include names one, as ansible-core looks for it, and its tasks
read before the run with the includer's keywords."""
from __future__ import annotations

import os

from fleetops.engine.boolean import parse_bool
from fleetops.engine.playbook.args import split_kv
from fleetops.engine.playbook.checks import IDENT, is_template, kind
from fleetops.engine.playbook.keywords import Inherit
from fleetops.engine.yamlsrc import Mapping, Sequence, load_yaml
from fleetops.errors import BadInput


def static_name(value, what: str, where: str | None) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput(f"{what} must be a name, not {kind(value)}", where=where)
    if is_template(value):
        raise BadInput(f"a templated {what} ({value!r}) is not supported: fleetops reads every task file "
                       "before the run, so name the file (use 'when' to choose)", where=where)
    return value.strip()


def import_name(value, what: str, where: str | None, inh: Inherit) -> str:
    """An import's file or role name; a template of play variables (and vars given to
    import_playbook) is rendered now, as ansible-core does; a host variable cannot apply, since
    an import is read before the run (it is an error in ansible-core too)."""
    if not is_template(value):
        return static_name(value, what, where)
    from fleetops.engine.templating import Templar, TemplateError
    try:
        rendered = Templar().render(value, {**inh.load.play_vars, **inh.vars})
    except TemplateError as exc:
        raise BadInput(f"a templated {what} ({value!r}) can use play variables only: {exc.msg} (an import "
                       "is read before the run; use include_tasks/include_role to choose per host)",
                       where=where) from None
    return static_name(rendered, what, where)


def include_args(m: Mapping, key: str, free: str) -> Mapping:
    """An include's arguments: `include_tasks: f.yml` or a mapping, plus the task's `args:`."""
    value = m[key]
    args = Mapping()
    args.where = m.value_where(key)
    if isinstance(value, str):
        for k, v in _free_form(value, free, key, m.value_where(key)).items():
            args[k] = v
            args.set_where(k, m.key_where(key), m.value_where(key))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            args[k] = v
            args.set_where(k, value.key_where(k), value.value_where(k))
    elif value is not None:
        raise BadInput(f"'{key}' must be a file name or a mapping, not {kind(value)}", where=m.value_where(key))
    extra = m.get("args")
    if isinstance(extra, Mapping):
        for k, v in extra.items():
            args[k] = v
            args.set_where(k, extra.key_where(k), extra.value_where(k))
    return args


def _free_form(text: str, free: str, key: str, where: str | None) -> dict:
    """`include_role: name=r tasks_from=x`, `include_tasks: f.yml`, read as ansible-core reads them:
    each `k=v` word is an argument, the other words together the file (include_tasks / import_tasks;
    a role has no free form: its `name=` is required)."""
    out: dict = {}
    raw = []
    for tok in split_kv(text, where):
        k, eq, v = tok.partition("=")
        if not eq or not IDENT.match(k):
            raw.append(tok)
            continue
        if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
            v = v[1:-1]
        flag = parse_bool(v) if k in ("public", "allow_duplicates") else None
        out[k] = v if flag is None else flag
    if raw and free == "name":
        raise BadInput(f"'name' is a required field for {key} (write {key}: name={' '.join(raw)}, or a mapping)"
                       if "name" not in out else f"unknown argument {' '.join(raw)!r} for {key}", where=where)
    if raw:
        out[free if free not in out else "_raw_params"] = " ".join(raw)
    return out


def find_task_file(name: str, inh: Inherit, where: str | None) -> str:
    """As ansible-core: beside the including file, in the role's tasks/, then the playbook's directory."""
    name = os.path.expanduser(name)
    bases = [inh.base_dir] + ([os.path.join(inh.role_path, "tasks"), inh.role_path] if inh.role_path else [])
    bases.append(inh.load.playbook_dir)
    for base in bases:
        path = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(path):
            return path
    raise BadInput(f"task file not found: {name} (looked in {', '.join(dict.fromkeys(bases))})", where=where)


def read_task_file(path: str, inh: Inherit, handler: bool, where: str | None) -> list:
    """The tasks of one task file, read with the includer's keywords."""
    if path in inh.files:
        raise BadInput(f"{os.path.basename(path)} includes itself (through {' -> '.join(map(os.path.basename, inh.files))})",
                       where=where)
    data = load_yaml(path)
    if data is None:
        return []
    if not isinstance(data, Sequence):
        raise BadInput(f"a task file must be a list of tasks, not {kind(data)}", where=getattr(data, "where", path))
    inh = inh.sub(base_dir=os.path.dirname(path), files=inh.files + (path,))
    out = []
    for i, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise BadInput(f"each entry of a task file must be a task (a mapping), not {kind(item)}",
                           where=data.item_where(i))
        out.append(inh.load.build_task(item, inh.load.modules, inh, handler))
    return out
