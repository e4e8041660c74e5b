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
    "ansible_role_names", "role_names", "ansible_inventory_sources"})


def task_magic(task: Any, play: Any, options: Any, playbook_dir: str, inventory_path: str | None) -> dict:
    out: dict = {
        "ansible_run_tags": list(getattr(options, "tags", None) or ["all"]),
        "ansible_skip_tags": list(getattr(options, "skip_tags", None) or []),
        "ansible_forks": getattr(options, "forks", None) or 5,
        "ansible_play_name": play.name or play.hosts,
        "ansible_playbook_python": sys.executable,
        "ansible_config_file": None,
    }
    roles = getattr(play, "_role_names", None)
    if roles is None:
        roles = list(dict.fromkeys(t.role for t in _walk(play) if t.role))
        play._role_names = roles
    out.update(ansible_play_role_names=roles, ansible_role_names=roles, role_names=roles)
    if inventory_path:
        path = os.path.abspath(inventory_path)
        out.update(inventory_file=path, inventory_dir=path if os.path.isdir(path) else os.path.dirname(path),
                   ansible_inventory_sources=[path])
    search = [playbook_dir]
    if task is not None and task.role:
        out.update(role_name=task.role, ansible_role_name=task.role)
        if task.role_path:
            out["role_path"] = task.role_path
            search.insert(0, task.role_path)
    out["ansible_search_path"] = search
    return out


def _walk(play: Any):
    from fleetops.engine.playbook.model import walk_tasks
    return walk_tasks(list(play.tasks) + list(play.handlers))
