"""The variable layers the run supplies to engine/variables.py: inventory (cached), facts,
play and vars_files, the magic variables, and `hostvars` computed only when looked up.
"""
from __future__ import annotations

import collections.abc
import os
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from fleetops.engine import secrets as _secrets
from fleetops.engine.inventory import short_name
from fleetops.engine.playcontext import PlayContext
from fleetops.engine.runcontext import Frame, HostState
from fleetops.engine.taskmagic import task_magic
from fleetops.engine.variables import layered

# the ansible-core release whose playbook semantics fleetops follows (and is tested against):
# what `ansible_version` gives a playbook that checks it (`ansible_version.full is version(...)`)
ANSIBLE_VERSION = {"full": "2.19.0", "major": 2, "minor": 19, "revision": 0, "string": "2.19.0 (fleetops)"}


# What _magic gives every task: set by the engine, never by a user (the magic layer wins).
MAGIC_NAMES = frozenset({
    "inventory_hostname", "inventory_hostname_short", "groups", "hostvars", "play_hosts",
    "ansible_play_hosts", "ansible_play_hosts_all", "ansible_play_batch", "ansible_check_mode",
    "ansible_diff_mode", "playbook_dir", "fleetops_run_id", "fleetops_results_dir", "omit",
    "ansible_version"})


class HostVars(collections.abc.Mapping):
    """`hostvars`: other hosts' variables, computed only when a template looks one up."""

    def __init__(self, run_vars: "RunVars", pctx: PlayContext):
        self._vars = run_vars
        self._pctx = pctx

    def __getitem__(self, host: str) -> dict:
        if host not in self._vars.inventory.hosts:
            raise KeyError(host)
        return self._vars.host_view(self._pctx, host)

    def __iter__(self) -> Iterator[str]:
        return iter(self._vars.inventory.hosts)

    def __len__(self) -> int:
        return len(self._vars.inventory.hosts)


@dataclass
class RunVars:
    """A run's variables per host and task; caches what does not change between tasks."""

    inventory: Any
    options: Any
    state: Callable[[str], HostState]
    playbook_dir: Any
    run_id: str
    omit: str
    lock: threading.RLock
    _inv_vars: dict = field(default_factory=dict)
    _groups: dict | None = None

    def inventory_vars(self, host: str) -> dict:
        v = self._inv_vars.get(host)
        if v is None:
            v = self.inventory.get_vars(host)
            with self.lock:
                self._inv_vars[host] = v
        return v

    def groups_changed(self, host: str) -> None:
        """A task added `host` to a group: `groups` and the host's group_names are recomputed."""
        self._groups = None
        self._inv_vars.pop(host, None)

    def groups(self) -> dict:
        if self._groups is None:
            self._groups = self.inventory.groups_map()
        return self._groups

    def live_hosts(self, pctx: PlayContext, live: list | None = None) -> tuple:
        """(play hosts not failed or unreachable, those of the current batch still running: `live`).

        Computed once per task, at its start, as Ansible's linear strategy does (computed per
        host, it made every task O(hosts²) at fleet size)."""
        batch = set(pctx.batch)
        running = set(pctx.batch if live is None else live)
        active = [h for h in pctx.hosts if not (self.state(h).failed or self.state(h).unreachable)
                  and (h in running or h not in batch)]
        alive = set(active)
        return active, [h for h in pctx.batch if h in running and h in alive]

    def _magic(self, pctx: PlayContext, host: str, check: bool) -> dict:
        active, active_batch = pctx.active or self.live_hosts(pctx)
        results_dir = os.path.abspath(self.options.results_dir)
        return {
            "inventory_hostname": host,
            "inventory_hostname_short": short_name(host),
            "groups": self.groups(),
            "hostvars": HostVars(self, pctx),
            "play_hosts": list(active),
            "ansible_play_hosts": list(active),
            "ansible_play_hosts_all": list(pctx.hosts),
            "ansible_play_batch": list(active_batch),
            "ansible_check_mode": bool(check),
            "ansible_diff_mode": bool(self.options.diff),
            "playbook_dir": self.playbook_dir,
            "fleetops_run_id": self.run_id,
            "fleetops_results_dir": results_dir,
            "omit": self.omit,
            "ansible_version": ANSIBLE_VERSION,
        }

    def task_vars(self, pctx: PlayContext, host: str, task: Any, frame: Frame, check: bool) -> dict:
        """Every variable the task sees, in the order of engine/variables.py."""
        st = self.state(host)
        facts = st.facts if "ansible_facts" in st.facts else {**st.facts, "ansible_facts": {}}   # none gathered yet
        return layered(role_defaults=task.defaults, inventory=self.inventory_vars(host), facts=facts,
                       play_vars=pctx.play.vars, vars_files=pctx.vars_files, task_vars=task.vars,
                       persistent=st.persistent, extra_vars=self.options.extra_vars,
                       magic={**task_magic(task, pctx.play, self.options, self.playbook_dir,
                                           getattr(self.inventory, "path", None)),
                              **self._magic(pctx, host, check)})

    def host_view(self, pctx: PlayContext, host: str) -> dict:
        """What `hostvars[host]` shows: everything but task-level vars."""
        st = self.state(host)
        with self.lock:
            persistent = dict(st.persistent)
        return layered(inventory=self.inventory_vars(host), facts=st.facts, play_vars=pctx.play.vars,
                       vars_files=pctx.vars_files, persistent=persistent, extra_vars=self.options.extra_vars,
                       magic={"inventory_hostname": host, "inventory_hostname_short": short_name(host)})

    @staticmethod
    def secret_values(variables: dict) -> set:
        return _secrets.collect_secret_values(variables, skip=MAGIC_NAMES)
