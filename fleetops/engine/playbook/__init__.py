"""Playbooks: loaded from position-carrying YAML into a checked model before any host is touched.

model (Playbook, Play, Task), play (play keywords and sections, the entry point), tasks (one task
or block), args (module arguments), includes (task files), roles, keywords (what each level may
carry and how it is inherited), checks (one value's type and name)."""
from fleetops.engine.playbook.args import check_args, resolve_module
from fleetops.engine.playbook.checks import check_var_names, is_template
from fleetops.engine.playbook.keywords import include_kind
from fleetops.engine.playbook.model import LOCALHOST, Play, Playbook, Task, walk_tasks
from fleetops.engine.playbook.play import load_playbook, set_limit

__all__ = ["LOCALHOST", "Play", "Playbook", "Task", "check_args", "check_var_names", "include_kind",
           "is_template", "load_playbook", "resolve_module", "set_limit", "walk_tasks"]
