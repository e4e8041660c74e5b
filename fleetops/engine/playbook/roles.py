"""Roles in the standard layout (tasks/ handlers/ defaults/ vars/ meta/), found
where ansible-core finds them, with their dependencies, defaults, vars and params."""
from __future__ import annotations

import os
from typing import cast

from fleetops.engine.playbook.checks import check_var_names, kind
from fleetops.engine.playbook.includes import read_task_file, static_name
from fleetops.engine.playbook.keywords import ROLE_ENTRY_KEYS, Inherit, inherit_keywords
from fleetops.engine.playbook.model import handler_list
from fleetops.engine.varsfile import load_vars_file
from fleetops.engine.yamlsrc import Mapping, Sequence, load_yaml
from fleetops.errors import BadInput

# where ansible-core looks for a role by name, after <playbook dir>/roles/ and <playbook dir>/
DEFAULT_ROLES_PATH = ("~/.ansible/roles", "/usr/share/ansible/roles", "/etc/ansible/roles")


def _find_role(name: str, inh: Inherit, where: str | None) -> str:
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


def _role_file(role_path: str, sub: str, name: str, where: str | None = None) -> str | None:
    """<role>/<sub>/<name>[.yml|.yaml], read as ansible-core reads it: the path normalised as text,
    and refused when that leaves <role>/<sub>/ (`tasks_from: ../../other/tasks/main.yml`)."""
    folder = os.path.join(role_path, sub)
    base = os.path.normpath(os.path.join(folder, name))
    if os.path.commonpath([base, folder]) != folder:
        raise BadInput(f"role {os.path.basename(role_path)}: {sub}_from {name!r} is not inside the role's "
                       f"{sub}/ directory ({folder})", where=where)
    for cand in ((base,) if os.path.splitext(name)[1] else (base + ".yml", base + ".yaml", base)):
        if os.path.isfile(cand):
            return cand
    return None


def _role_vars_file(role_path: str, sub: str, name: str, where: str | None, required: bool) -> dict:
    path = _role_file(role_path, sub, name, where)
    if path is None:
        if required:
            raise BadInput(f"role {os.path.basename(role_path)}: {sub}/{name} not found", where=where)
        return {}
    return load_vars_file(path, what=f"a role's {sub} file")


def load_role(name: str, inh: Inherit, params: dict, where: str | None, froms: dict, once: bool = True,
          entry_vars: dict | None = None, parent: str | None = None, export: bool = True) -> list:
    """A role's tasks (its meta dependencies first), with its defaults, vars and params; its handlers
    join the play's. As ansible-core, a role listed twice with the same params runs once (`roles:`),
    and the vars and defaults of a static role (`roles:`, import_role, a public include_role) are
    the whole play's (`export`)."""
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
    inh.load.var_files += [f for f in (defaults, role_vars) if f]
    if export:
        inh.load.exported.append((role_vars, defaults))
    out: list = []
    deps = meta.get("dependencies") or []
    if not isinstance(deps, list):
        raise BadInput("'dependencies' must be a list of roles", where=meta.value_where("dependencies"))
    for i, dep in enumerate(deps):
        out += role_entry(dep, inh, deps.item_where(i) if isinstance(deps, Sequence) else meta.where,
                           parent=path)   # a dependency runs once per role that depends on it
    rinh = inh.sub(vars={**inh.vars, **role_vars, **params}, defaults={**inh.defaults, **defaults},
                   role=role_name, role_path=path, base_dir=os.path.join(path, "tasks"))
    tasks_path = _role_file(path, "tasks", froms.get("tasks_from", "main"), where)
    if tasks_path is None and "tasks_from" in froms:
        raise BadInput(f"role {role_name}: tasks/{froms['tasks_from']} not found", where=where)
    if tasks_path:
        out += read_task_file(tasks_path, rinh, False, where)
    handlers_path = _role_file(path, "handlers", froms.get("handlers_from", "main"), where)
    if handlers_path and handlers_path not in inh.load.handler_files:
        inh.load.handler_files.add(handlers_path)
        for h in handler_list(read_task_file(handlers_path, rinh, True, where)):
            if h.name:                    # `notify: "role : handler"` names it too, as in Ansible
                h.listen = list(h.listen) + [f"{role_name} : {h.name}"]
            inh.load.handlers.append(h)
    return out


def role_entry(entry, inh: Inherit, where: str | None, parent: str | None = None) -> list:
    """One `roles:` (or meta `dependencies:`) item: a name, or a mapping of role, keywords and params."""
    if isinstance(entry, str):
        return load_role(static_name(entry, "role name", where), inh, {}, where, {}, parent=parent)
    if not isinstance(entry, Mapping):
        raise BadInput(f"a role entry must be a name or a mapping, not {kind(entry)}", where=where)
    name_key = "role" if "role" in entry else "name"
    name = static_name(entry.get(name_key), "role name", entry.where)
    sub, own = inherit_keywords(entry, inh)
    params = {k: v for k, v in entry.items() if k not in ROLE_ENTRY_KEYS}
    check_var_names(Mapping(params))
    return load_role(name, sub, params, entry.where, {}, entry_vars=own["vars"], parent=parent)


def play_roles(m: Mapping, inh: Inherit) -> list:
    raw = m.get("roles")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadInput(f"'roles' must be a list of roles, not {kind(raw)}", where=m.value_where("roles"))
    out: list = []
    for i, entry in enumerate(raw):
        out += role_entry(entry, inh, cast(Sequence, raw).item_where(i))
    return out
