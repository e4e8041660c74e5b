"""The playbook model: a Playbook of Plays of Tasks, as loaded and checked.

Block keywords are inherited the Ansible way when the model is built: a
task's `tags`, `when`, `vars`, `become`, `become_user`, `check_mode`,
`ignore_errors`, `run_once` and `delegate_to` are already the effective values
(own + enclosing blocks + play), so applying them again is harmless.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

LOCALHOST = ("localhost", "127.0.0.1")


@dataclass
class Task:
    """One task, block (module None, `block` set) or handler (is_handler True)."""

    where: str | None
    name: str | None = None
    module: str | None = None
    args: dict = field(default_factory=dict)      # unrendered; a Mapping with key_where()
    when: list = field(default_factory=list)       # raw expressions/bools, ANDed (incl. enclosing blocks')
    loop: Any = None                               # raw: a list or a template string
    loop_var: str = "item"
    loop_label: Any = None
    register: str | None = None
    retries: Any = None                            # int or template; 3 when `until` is set without it
    until: list | None = None                      # raw expressions, ANDed
    delay: Any = 5
    failed_when: list | None = None
    changed_when: list | None = None
    ignore_errors: bool = False
    notify: list = field(default_factory=list)
    tags: list = field(default_factory=list)       # effective: play + blocks + own
    run_once: bool = False
    delegate_to: str | None = None                 # localhost, an inventory host, or a template of one
    check_mode: bool | None = None
    vars: dict = field(default_factory=dict)       # effective: enclosing blocks' vars, then own
    become: bool = False                           # effective (play, blocks, own)
    become_user: str | None = None                 # effective
    block: list | None = None
    rescue: list | None = None
    always: list | None = None
    listen: list = field(default_factory=list)
    is_handler: bool = False
    delegate_facts: bool = False                   # facts the task sets go to its delegate_to host
    remote_user: str | None = None                 # effective (play, blocks, own)
    connection: str | None = None                  # effective `connection` keyword: local, ssh or None
    environment: list = field(default_factory=list)  # `environment` parts (play, role, blocks, own), outer first
    no_log: Any = False                            # effective: true hides the result from every output
    role: str | None = None                        # the role this task comes from
    role_path: str | None = None                   # its directory: templates/ and files/ resolve there first
    defaults: dict = field(default_factory=dict)   # role defaults: below every other variable
    include: str | None = None                     # include_tasks / import_tasks / *_role: a block of its file
    async_val: Any = 0                             # `async:` seconds (int or template); 0: in the foreground
    poll: Any = 15                                 # `poll:` seconds between status checks; 0: fire and forget
    dynamic: Any = None                            # a looped or templated include_*: playbook/dynamic.py
    unread: Any = None                             # a handler's include its file refused (BadInput): raised if notified
    action: str | None = None                      # the module or include key as written (ansible.builtin.x)
    implicit: bool = False                         # added by fleetops (handler flushes), not in the playbook
    positions: dict = field(default_factory=dict, repr=False)   # key -> file:line:col
    own: dict = field(default_factory=dict, repr=False)         # own 'when'/'vars' before inheritance

    def key_where(self, key: str | None) -> str | None:
        """file:line:col of one of this task's keys (the task's own position if absent)."""
        return self.positions.get(key, self.where)

    @property
    def is_block(self) -> bool:
        return self.block is not None

    @property
    def display_name(self) -> str:
        name = self.name or self.include or self.module or "block"
        return f"{self.role} : {name}" if self.role else name


@dataclass
class Play:
    where: str | None
    name: str | None = None
    hosts: str = ""
    hosts_written: list = field(default_factory=list)   # `hosts:` as a list of patterns, as written
    vars: dict = field(default_factory=dict)
    vars_files: list = field(default_factory=list)  # paths joined to the playbook's directory
    serial: list = field(default_factory=list)      # [] = all hosts at once; ints and "N%" strings
    max_fail_percentage: float | None = None
    # a templated serial / max_fail_percentage: {key: (template, where)}, rendered by validate()
    # from play vars, vars_files and extra vars before any host is touched (see set_limit)
    limit_templates: dict = field(default_factory=dict, repr=False)
    limits_resolved: bool = field(default=False, repr=False)
    any_errors_fatal: bool = False
    gather_facts: bool = True
    tasks: list = field(default_factory=list)
    handlers: list = field(default_factory=list)
    role_var_files: list = field(default_factory=list, repr=False)   # roles' vars/defaults read before the run
    tags: list = field(default_factory=list)
    become: bool = False
    become_user: str | None = None
    remote_user: str | None = None
    connection: str | None = None                   # the `connection` keyword (below ansible_connection)
    environment: list = field(default_factory=list)  # the play's `environment` parts (fact gathering's too)
    strategy: str = "linear"                        # free runs as linear (docs/guides/ansible-users.md)
    order: str = "inventory"
    vars_files_where: list = field(default_factory=list, repr=False)
    positions: dict = field(default_factory=dict, repr=False)
    base_dir: str | None = None                     # the directory of the playbook file the play is in
    prompts: list = field(default_factory=list)     # vars_prompt names with no default: (name, where), -e must give them

    def key_where(self, key: str | None) -> str | None:
        return self.positions.get(key, self.where)


@dataclass
class Playbook:
    path: str
    plays: list = field(default_factory=list)

    @property
    def dir(self) -> str:
        """playbook_dir: where vars_files, templates/ and files/ resolve from."""
        return os.path.dirname(os.path.abspath(self.path))


def walk_tasks(tasks):
    """Every task in a list, depth first, blocks included (block, rescue, always)."""
    for t in tasks or ():
        yield t
        if t.is_block:
            yield from walk_tasks(t.block)
            yield from walk_tasks(t.rescue)
            yield from walk_tasks(t.always)


def handler_list(tasks: list) -> list:
    """Handlers as ansible-core has them: an import_tasks among them stands for its tasks, each a
    handler by its own name (the import's name notifies nothing); an include_tasks is one handler
    that runs its tasks when notified."""
    out: list = []
    for t in tasks:
        out += handler_list(t.block or []) if t.include == "import_tasks" else [t]
    return out
