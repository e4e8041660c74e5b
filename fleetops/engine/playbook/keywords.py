"""The keywords a play, task, block, include or role entry may carry, and how
they flow from the play and enclosing blocks into each task."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fleetops.engine.connection.transport import CONNECTIONS, connection_name
from fleetops.engine.playbook.checks import (close, want_bool, want_bool_or_template, want_conditions,
                                             want_environment, want_str, want_str_list, want_vars)
from fleetops.engine.yamlsrc import Mapping
from fleetops.errors import BadInput

BUILTIN_PREFIXES = ("ansible.builtin.", "ansible.legacy.")

PLAY_KEYS = ("name", "hosts", "vars", "vars_files", "serial", "max_fail_percentage",
             "any_errors_fatal", "gather_facts", "tasks", "handlers", "tags", "become",
             "become_user", "remote_user", "pre_tasks", "post_tasks", "roles", "strategy", "order",
             "vars_prompt", "connection", "environment", "no_log")
# play keywords that may be templates of play vars, vars_files and -e (rendered by validate)
PLAY_BOOL_KEYS = ("any_errors_fatal", "gather_facts")
STRATEGIES = ("linear", "free")
ORDERS = ("inventory", "reverse_inventory", "sorted", "reverse_sorted", "shuffle")
TASK_KEYS = ("name", "args", "when", "loop", "with_items", "loop_control", "register",
             "retries", "until", "delay", "failed_when", "changed_when", "ignore_errors",
             "notify", "tags", "run_once", "delegate_to", "check_mode", "vars", "become",
             "become_user", "block", "rescue", "always", "listen", "remote_user", "action", "local_action",
             "delegate_facts", "connection", "async", "poll", "environment", "no_log")
ASYNC_MODULES = ("command", "shell")    # a module whose host work is one command line
DEFAULT_POLL = 15                       # ansible-core's DEFAULT_POLL_INTERVAL
BLOCK_KEYS = ("name", "when", "tags", "vars", "become", "become_user", "check_mode",
              "ignore_errors", "run_once", "delegate_to", "connection", "environment", "no_log", "block", "rescue",
              "always", "remote_user")
INCLUDE_KEYS = ("include_tasks", "import_tasks", "include_role", "import_role")
DYNAMIC = ("include_tasks", "include_role")      # read when reached: may loop, may template the name
LOOP_KEYS = ("loop", "with_items", "loop_control")
INCLUDE_TASK_KEYS = BLOCK_KEYS[:-4] + ("remote_user", "args")
ROLE_ENTRY_KEYS = ("role", "name", "when", "tags", "vars", "become", "become_user", "remote_user", "connection",
                   "environment", "no_log")

ROLE_FROM_KEYS = ("tasks_from", "vars_from", "defaults_from", "handlers_from")
LOOP_CONTROL_KEYS = ("loop_var", "label", "index_var", "extended", "extended_allitems", "pause", "break_when")
NOT_SUPPORTED = {
    "import_playbook": "import_playbook is a playbook entry, not a task or play key",
    "include": "'include' was removed from Ansible (2.16): use include_tasks or import_tasks",
}


def unknown_keys(m: Mapping, allowed, what: str, extra_options=()):
    for k in m:
        if k not in allowed:
            if k in NOT_SUPPORTED:
                raise BadInput(NOT_SUPPORTED[k], where=m.key_where(k))
            raise BadInput(f"unknown key {k!r} in {what}{close(k, tuple(allowed) + tuple(extra_options))}",
                           where=m.key_where(k))


# ---------------------------------------------------------------- play


@dataclass
class Inherit:
    """Keyword values flowing from the play and enclosing blocks into tasks."""

    tags: list = field(default_factory=list)
    when: list = field(default_factory=list)
    vars: dict = field(default_factory=dict)
    become: bool = False
    become_user: str | None = None
    check_mode: bool | None = None
    ignore_errors: bool = False
    run_once: bool = False
    delegate_to: str | None = None
    remote_user: str | None = None
    connection: str | None = None        # the `connection` keyword: local or ssh
    environment: list = field(default_factory=list)   # `environment` parts, outermost first
    no_log: Any = False                  # true, false or a template rendered per host
    base_dir: str = "."                  # where a relative include_tasks file is looked for first
    role: str | None = None
    role_path: str | None = None
    defaults: dict = field(default_factory=dict)
    load: Any = None                     # the play's Load
    files: tuple = ()                    # task files being read (a loop of includes is BadInput)

    def sub(self, **changes) -> "Inherit":
        out = Inherit(**{**self.__dict__})
        for k, v in changes.items():
            setattr(out, k, v)
        return out


@dataclass
class Load:
    """What reading one play needs beyond the YAML: modules, the playbook's directory, roles seen,
    and the task builder (given here so that task files and roles can read tasks without a cycle)."""

    modules: dict
    playbook_dir: str
    build_task: Any = None                        # tasks.build_task
    roles_path: tuple = ()                        # ansible.cfg roles_path (else DEFAULT_ROLES_PATH)
    roles_run: set = field(default_factory=set)   # (role path, params) already in the play
    handlers: list = field(default_factory=list)  # the roles' handlers, in load order
    handler_files: set = field(default_factory=set)
    exported: list = field(default_factory=list)  # (vars, defaults) of the play's static roles, in load order
    var_files: list = field(default_factory=list)  # every role vars/defaults file read (their templates are validated)
    play_vars: dict = field(default_factory=dict)  # what a templated import name may use
    candidates_read: set = field(default_factory=set)  # files read for a templated include's names


def inherit_keywords(m: Mapping, inh: Inherit):
    """The keywords a task, block, include or role entry passes down: (inherit for what is
    inside, the entry's own 'when'/'vars' before inheritance)."""
    own_when = want_conditions(m, "when") or []
    own_tags = want_str_list(m, "tags", split_commas=True)
    own_vars = want_vars(m, "vars")
    delegate = want_str(m, "delegate_to")

    def flag(key, current):
        own = want_bool(m, key)
        return current if own is None else own
    sub = inh.sub(
        when=list(inh.when) + own_when, tags=list(dict.fromkeys(inh.tags + own_tags)),
        vars={**inh.vars, **own_vars}, become=flag("become", inh.become),
        become_user=want_str(m, "become_user", default=inh.become_user),
        check_mode=flag("check_mode", inh.check_mode), ignore_errors=flag("ignore_errors", inh.ignore_errors),
        run_once=flag("run_once", inh.run_once),
        delegate_to=delegate.strip() if delegate is not None else inh.delegate_to,
        remote_user=want_str(m, "remote_user", default=inh.remote_user),
        connection=want_connection(m, default=inh.connection),
        environment=list(inh.environment) + want_environment(m),
        no_log=want_bool_or_template(m, "no_log", inh.no_log))
    return sub, {"when": own_when, "vars": own_vars}


def want_connection(m: Mapping, default: str | None = None) -> str | None:
    """The `connection` keyword: a plugin fleetops has, else one line naming the ones it has."""
    if "connection" not in m:
        return default
    value = want_str(m, "connection")
    found = connection_name(value)
    if found is None:
        raise BadInput(f"connection {value!r} is not supported: fleetops connects by "
                       f"{', '.join(CONNECTIONS)}", where=m.value_where("connection"))
    return found


def include_kind(key) -> str | None:
    """'include_tasks' for `include_tasks` or `ansible.builtin.include_tasks`, ...; else None."""
    if not isinstance(key, str):
        return None
    for prefix in ("",) + BUILTIN_PREFIXES:
        if key.startswith(prefix) and key[len(prefix):] in INCLUDE_KEYS:
            return key[len(prefix):]
    return None
