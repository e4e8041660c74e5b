"""A task's variables, in ansible-core's precedence: the one place that orders them.

Lowest first: role defaults < inventory (group_vars, host_vars, host) < facts < play vars
< vars_files < block and task vars < registered results and set_fact < extra vars (-e)
< the magic variables (inventory_hostname, hostvars, ansible_check_mode, ...).
`hostvars[host]` shows the same layers without the task's own (no role defaults, no
block/task vars) and with only the host's names as magic variables.
"""
from __future__ import annotations

from typing import Mapping, Optional


def layered(*, inventory: Mapping, facts: Mapping, play_vars: Optional[Mapping], vars_files: Mapping,
            persistent: Mapping, extra_vars: Optional[Mapping], magic: Mapping,
            role_defaults: Optional[Mapping] = None, task_vars: Optional[Mapping] = None) -> dict:
    """One dict of every layer, each overriding those below it."""
    v = dict(role_defaults or {})
    for layer in (inventory, facts, play_vars, vars_files, task_vars, persistent, extra_vars, magic):
        v.update(layer or {})
    return v
