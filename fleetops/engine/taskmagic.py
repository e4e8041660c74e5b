"""The magic variables ansible-core gives a task from where it stands: its role (`role_name`,
`role_path`, `ansible_role_name`), the search path its lookups and file arguments use, and the
run's own (`ansible_run_tags`, `ansible_skip_tags`, `ansible_forks`, `ansible_play_name`,
`ansible_playbook_python`, `inventory_file`, `inventory_dir`, `ansible_config_file`)."""
from __future__ import annotations

import os
import sys
from typing import Any

# the names task_magic may give; validation knows them as defined
TASK_MAGIC_NAMES = frozenset({
    "role_name", "role_path", "ansible_role_name", "ansible_search_path", "ansible_run_tags",
    "ansible_skip_tags", "ansible_forks", "ansible_play_name", "ansible_playbook_python",
    "inventory_file", "inventory_dir", "ansible_config_file", "ansible_play_role_names",
    "ansible_role_names", "role_names", "ansible_inventory_sources", "ansible_dependent_role_names"})


def task_magic(task: Any, play: Any, options: Any, playbook_dir: str, inventory_path: str | None) -> dict:
    out: dict = {
        "ansible_run_tags": list(getattr(options, "tags", None) or ["all"]),
        "ansible_skip_tags": list(getattr(options, "skip_tags", None) or []),
        "ansible_forks": getattr(options, "forks", None) or 5,
        "ansible_play_name": play.name or play.hosts,
        "ansible_playbook_python": sys.executable,
        "ansible_config_file": None,
    }
    names = getattr(play, "_role_names", None)
    if names is None:
        names = play._role_names = _role_names(play)
    every, dependent = names
    direct = [r for r in every if r not in dependent]
    out.update(ansible_play_role_names=direct, role_names=direct, ansible_role_names=every,
               ansible_dependent_role_names=dependent)
    if inventory_path:
        path = os.path.abspath(inventory_path)
        out.update(inventory_file=path, inventory_dir=path if os.path.isdir(path) else os.path.dirname(path),
                   ansible_inventory_sources=[path])
    search = []         # ansible-core's Task.get_search_path, the playbook's directory last
    if task is not None and task.role:
        out.update(role_name=task.role, ansible_role_name=task.role)
        if task.role_path:
            out["role_path"] = task.role_path
            search.append(task.role_path)
    where = getattr(task, "where", None) if task is not None else None
    if where:
        search.append(os.path.dirname(os.path.abspath(where.rsplit(":", 2)[0])))
    out["ansible_search_path"] = list(dict.fromkeys(search + [playbook_dir]))
    return out


def _role_names(play: Any) -> tuple:
    """(every role the play runs, those only there as another role's meta dependency)."""
    paths = dict.fromkeys((t.role, t.role_path) for t in _walk(play) if t.role)
    every = list(dict.fromkeys(name for name, _ in paths))
    deps: list = []
    for _, path in paths:
        for dep in _meta_dependencies(path):
            if dep not in deps:
                deps.append(dep)
    every += [d for d in deps if d not in every]     # a dependency with no tasks still ran
    return every, [d for d in every if d in deps]


def _meta_dependencies(role_path: str | None) -> list:
    import yaml
    for name in ("main.yml", "main.yaml", "main"):
        meta = os.path.join(role_path or "", "meta", name)
        if role_path and os.path.isfile(meta):
            try:
                with open(meta, encoding="utf-8") as f:
                    doc = yaml.safe_load(f) or {}
            except (OSError, yaml.YAMLError):
                return []
            deps = doc.get("dependencies") if isinstance(doc, dict) else None
            out = []
            for d in deps if isinstance(deps, list) else []:
                d = d.get("role", d.get("name")) if isinstance(d, dict) else d
                if isinstance(d, str):
                    out.append(os.path.basename(d))
            return out
    return []


def _walk(play: Any):
    from fleetops.engine.playbook.model import walk_tasks
    return walk_tasks(list(play.tasks) + list(play.handlers))
