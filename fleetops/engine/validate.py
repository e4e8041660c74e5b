"""Check a whole playbook against the inventory before any host is contacted.

A run that would fail half way (a pattern matching nothing, a missing vars
file, a typo in a variable name) must instead fail at once with one line
naming the file:line:column, and nothing is run on any host.
"""
from __future__ import annotations

import difflib
import os

from fleetops.engine.playbook import Play, Playbook, Task, check_args, set_limit, walk_tasks
from fleetops.engine.templating import Templar, TemplateError
from fleetops.engine.setfact_names import templated_names
from fleetops.engine.taskmagic import TASK_MAGIC_NAMES
from fleetops.engine.varsfile import load_vars_file
from fleetops.engine.yamlsrc import Mapping
from fleetops.errors import BadInput

FACT_NAMES = frozenset({
    "ansible_facts", "ansible_architecture", "ansible_machine", "ansible_system",
    "ansible_kernel", "ansible_os_family", "ansible_distribution",
    "ansible_distribution_version", "ansible_distribution_release", "ansible_python_version",
    "ansible_python", "ansible_sqlite_version", "ansible_hostname", "ansible_fqdn",
    "ansible_user_id", "ansible_user_uid", "ansible_user_dir", "ansible_nproc",
    "ansible_distribution_major_version", "ansible_pkg_mgr", "ansible_default_ipv4", "ansible_env",
    "fleetops_sqlite_fts5", "fleetops_sqlite_trigram",
})

MAGIC_VARS = frozenset({
    "inventory_hostname", "inventory_hostname_short", "group_names", "groups", "hostvars",
    "play_hosts", "ansible_play_hosts", "ansible_play_batch", "ansible_check_mode",
    "ansible_diff_mode", "playbook_dir", "inventory_dir", "omit", "fleetops_run_id",
    "fleetops_results_dir", "item", "ansible_loop", "ansible_version", "ansible_play_hosts_all",
}) | TASK_MAGIC_NAMES

# Defined by the executor only inside `rescue:` (as in Ansible).
RESCUE_VARS = frozenset({"ansible_failed_task", "ansible_failed_result"})


class _Checker:
    """Walks one play's templates against the names that will be defined when they render."""

    def __init__(self, templar: Templar, handlers: set, modules: dict):
        self.templar = templar
        self.handlers = handlers
        self.modules = modules

    def check(self, value, known: set, where: str | None, conditional: bool = False,
              guards: frozenset = frozenset()):
        try:
            needed = self.templar.undeclared(value, conditional=conditional)
            if needed:
                needed -= known | guards | self.templar.defined_guards(value, conditional=conditional)
        except TemplateError as exc:
            raise BadInput(exc.msg, where=where) from None
        if needed:
            name = sorted(needed)[0]
            near = difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.75)
            hint = f" (did you mean: {', '.join(near)}?)" if near else ""
            raise BadInput(f"undefined variable '{name}'{hint}", where=where)
        try:
            self.templar.check_sandbox(value, conditional=conditional)
        except TemplateError as exc:
            raise BadInput(exc.msg, where=where) from None

    def check_tree(self, value, known: set, where: str | None, guards: frozenset):
        """Templates anywhere in nested args, each reported at the key holding it."""
        if isinstance(value, dict):
            for k, v in value.items():
                kw = value.key_where(k) if isinstance(value, Mapping) else where
                if isinstance(k, str):
                    self.check(k, known, kw, guards=guards)
                self.check_tree(v, known, kw, guards)
        elif isinstance(value, list):
            for item in value:
                self.check_tree(item, known, where, guards)
        else:
            self.check(value, known, where, guards=guards)

    def conditions(self, task: Task):
        """A module's bare-condition arguments (assert's `that`): an unknown filter, test or lookup
        or a sandbox escape is refused, as in `when:`; their variables are the module's to judge."""
        module = self.modules.get(task.module)
        for key in getattr(module, "condition_args", ()):
            if isinstance(task.args, dict) and key in task.args:
                where = task.args.key_where(key) if isinstance(task.args, Mapping) else task.key_where(str(task.module))
                try:
                    self.templar.check_names(task.args[key], conditional=True)
                    self.templar.check_sandbox(task.args[key], conditional=True)
                except TemplateError as exc:
                    raise BadInput(exc.msg, where=where) from None

    def names(self, variables: Mapping):
        """A role's vars or defaults: an unknown filter, test or lookup is refused at the variable's
        line (their other names are checked where a task uses them)."""
        for k, v in variables.items():
            try:
                self.templar.check_names(v)
            except TemplateError as exc:
                if "syntax" not in exc.msg:     # a syntax error is left to where the variable is used
                    raise BadInput(f"variable '{k}': {exc.msg}", where=variables.key_where(k)) from None

    def check_vars(self, variables: dict, known: set, fallback: str | None, guards=frozenset()):
        for k, v in variables.items():
            kw = variables.key_where(k) if isinstance(variables, Mapping) else fallback
            self.check_tree(v, known, kw, guards)

    def task(self, task: Task, known: set, guards: frozenset, rescue: bool = False):
        scope = set(known) | set(task.vars) | set(task.defaults)
        if rescue:
            scope |= RESCUE_VARS
        if task.loop is not None:
            scope |= {task.loop_var, "ansible_loop", "ansible_index_var", "ansible_loop_var"}
            if task.own.get("loop_control", {}).get("index_var"):
                scope.add(task.own["loop_control"]["index_var"])
        own_when = task.own.get("when", task.when)
        try:
            guards = guards | self.templar.defined_guards(own_when, conditional=True)
        except TemplateError as exc:
            raise BadInput(exc.msg, where=task.key_where("when")) from None
        self.check_vars(task.own.get("vars", {}), scope, task.key_where("vars"), guards)
        self.check(own_when, scope, task.key_where("when"), conditional=True, guards=guards)
        for key in ("become_user",):
            if isinstance(getattr(task, key), str) and key in task.positions:
                self.check(getattr(task, key), scope, task.key_where(key), guards=guards)
        if task.dynamic is not None:
            if task.loop is not None:
                self.check_tree(task.loop, known | set(task.vars), task.key_where("loop"), guards)
            for text in [task.dynamic.name, *task.dynamic.froms.values()]:
                self.check(text, scope, task.dynamic.where, guards=guards)
        if task.is_block:
            for sub in task.block or ():
                self.task(sub, scope, guards, rescue)
            for sub in task.rescue or ():
                self.task(sub, scope, guards, True)
            for sub in task.always or ():
                self.task(sub, scope, guards, rescue)
            return
        if task.loop is not None:
            self.check_tree(task.loop, known | set(task.vars), task.key_where("loop"), guards)
        self.check_tree(task.args, scope, task.key_where(str(task.module)), guards)
        self.conditions(task)
        if task.environment:
            where = task.key_where("environment") if "environment" in task.positions else task.where
            self.check_tree(task.environment, scope, where, guards)
        for key in ("until", "failed_when", "changed_when"):
            value = getattr(task, key)
            if value is not None:
                self.check(value, scope, task.key_where(key), conditional=True, guards=guards)
        for key in ("retries", "delay"):
            if key in task.positions:
                self.check(getattr(task, key), scope, task.key_where(key), guards=guards)
        if task.loop_label is not None:
            self.check_tree(task.loop_label, scope, task.key_where("loop_control"), guards)
        for name in task.notify:
            if name not in self.handlers:
                near = difflib.get_close_matches(name, sorted(self.handlers), n=3, cutoff=0.6)
                hint = (f" (did you mean: {', '.join(near)}?)" if near else
                        f" (handlers: {', '.join(sorted(self.handlers))})" if self.handlers else
                        " (the play has no handlers)")
                raise BadInput(f"notify '{name}' matches no handler name or listen{hint}",
                               where=task.key_where("notify"))


def _select(play: Play, inventory, grouping: bool = False) -> list:
    """The play's hosts; after a group_by a pattern may name a group made while running, so
    matching nothing yet is allowed then, and every host is checked as a possible member."""
    where = play.key_where("hosts")
    try:
        hosts = list(inventory.select(play.hosts))
    except BadInput as exc:
        if exc.where:
            raise
        raise BadInput(exc.msg, where=where) from None
    if not hosts and grouping:
        return list(inventory.select("all"))
    if not hosts:
        inv = inventory.path or "(inventory)"
        raise BadInput(f"hosts pattern '{play.hosts}' matches no host in inventory {inv}", where=where)
    return hosts


def _refuse_unread_handlers(play: Play) -> None:
    """A handler whose include's file was refused (an unknown module, say) is an error only if a
    task can notify it: ansible-core reads it when it runs, and one that no task notifies never
    does (setup_remote_tmp_dir's Windows clean-up on a Linux host). A templated notify could name
    any handler."""
    unread = [h for h in play.handlers if h.unread is not None]
    if not unread:
        return
    every = list(walk_tasks(list(play.tasks) + list(play.handlers)))
    for t in every:
        if t.dynamic is not None:
            every.extend(walk_tasks(t.dynamic.candidates))
    notified = {n for t in every for n in (t.notify or ())}
    templated = any(Templar.is_template(n) for n in notified)
    for h in unread:
        if templated or h.name in notified or notified & set(h.listen or ()):
            raise h.unread


def _runtime_names(play: Play, modules: dict, base_dir: str) -> set:
    """Names a play defines while it runs: `register:`, set_fact keys, and what a module says it
    defines (`defines(task, base_dir)`: include_vars' files)."""
    names = set()
    every = list(walk_tasks(list(play.tasks) + list(play.handlers)))
    for t in every:          # and the candidates' own candidates: each file is read once, wherever
        if t.dynamic is not None:
            every.extend(walk_tasks(t.dynamic.candidates))
    for t in every:
        if t.register:
            names.add(t.register)
        defines = getattr(modules.get(t.module), "defines", None) if t.module else None
        if defines is not None:
            names |= defines(t, play.base_dir or base_dir)
        if t.module == "set_fact" and isinstance(t.args, dict):
            names |= {k for k in t.args if isinstance(k, str) and k != "cacheable" and "{{" not in k}
            for k in (k for k in t.args if isinstance(k, str) and "{{" in k):
                names |= templated_names(t, k)
    return names


def check_inventory_templates(templar: Templar, inventory, host: str, variables: dict, seen: set) -> None:
    """Inventory values are templates too: one reaching for Python internals or naming a filter,
    test or lookup fleetops does not have is refused here, at its own file:line, before any host
    is contacted (each distinct text is checked once)."""
    origins = None
    for name, value in variables.items():
        for text in _template_strings(value):
            if text in seen:
                continue
            try:
                templar.check_sandbox(text)
                templar.check_names(text)
            except TemplateError as exc:
                if "syntax" in exc.msg:
                    continue    # left to render time, where a use of it fails (as in Ansible)
                if origins is None and hasattr(inventory, "var_origins"):
                    origins = inventory.var_origins(host)
                where = (origins or {}).get(name) or inventory.path
                raise BadInput(f"host '{host}': variable '{name}': {exc.msg}", where=where) from None
            seen.add(text)


def _template_strings(value, depth: int = 0):
    if isinstance(value, str):
        if Templar.is_template(value):
            yield value
    elif depth < 50 and isinstance(value, dict):
        for v in value.values():
            yield from _template_strings(v, depth + 1)
    elif depth < 50 and isinstance(value, (list, tuple)):
        for v in value:
            yield from _template_strings(v, depth + 1)


def check_connections(inventory, hosts, extra_vars: dict | None = None, playbook_dir: str | None = None) -> None:
    """Connection inputs are bad input too: a bad port, a templated value that does not render,
    a missing private key, a key readable by others or encrypted with no agent is refused before
    any host is contacted. Templated values render as the executor renders them (template_vars)."""
    if not hasattr(inventory, "connection_params"):
        return
    from fleetops.engine.connection.keys import check_private_key

    templar = Templar()
    checked: set = set()
    for host in hosts:
        env = inventory.template_vars(host, extra_vars)
        env["playbook_dir"] = playbook_dir

        params = inventory.connection_params(host, render=lambda value, env=env: templar.render(value, env),
                                             extra_vars=extra_vars)
        if params.key_file and params.key_file not in checked:
            checked.add(params.key_file)
            try:
                check_private_key(params.key_file)
            except BadInput as exc:
                raise BadInput(f"host {host}: {exc.msg}", where=exc.where or inventory.path) from None


def _resolve_limits(templar: Templar, play: Play, files: list, extra_vars: dict, inventory=None) -> None:
    """Templated play keywords (hosts, serial, max_fail_percentage, ...) from play vars,
    vars_files, extra vars and `groups`, as ansible-core renders them (host variables cannot
    apply: hosts are chosen and batches cut before any host runs), fixed here, before the run."""
    variables: dict = dict(play.vars)
    for f in files:
        variables.update(f)
    if inventory is not None and hasattr(inventory, "groups_map"):
        variables["groups"] = inventory.groups_map()
    variables.update(extra_vars or {})
    for key, (value, where) in play.limit_templates.items():
        try:
            rendered = templar.render(value, variables)
        except TemplateError as exc:
            raise BadInput(f"{exc.msg} in '{key}' (play vars, vars_files, -e and groups apply here, not host vars)",
                           where=where) from None
        set_limit(play, key, rendered)
    play.limits_resolved = True


def validate(playbook: Playbook, inventory, extra_vars: dict, modules: dict) -> None:
    """Raise BadInput for the first problem in the playbook; return None when it can run."""
    templar = Templar()
    seen_templates: set = set()
    extra = set(extra_vars or {})
    runtime: set = set()   # registered / set_fact names persist per host across plays
    grouping = False       # a group_by or add_host ran before: later patterns may name what it makes
    adds_hosts = any(t.module == "add_host" for play in playbook.plays
                     for t in walk_tasks(list(play.tasks) + list(play.handlers)))
    for play in playbook.plays:
        for name, where in play.prompts:
            if name not in extra:
                raise BadInput(f"vars_prompt '{name}' has no default and is not given with -e: a fleetops "
                               f"run never stops to ask; pass -e {name}=...", where=where)
        files: list = []
        for path, where in zip(play.vars_files, play.vars_files_where):
            if not os.path.isfile(path):
                raise BadInput(f"vars file not found: {path}", where=where)
            try:
                files.append(load_vars_file(path))
            except BadInput as exc:
                if exc.where:
                    raise
                raise BadInput(exc.msg, where=where) from None
        if play.limit_templates:
            _resolve_limits(templar, play, files, extra_vars, inventory)
        hosts = _select(play, inventory, grouping)
        grouping = grouping or any(t.module in ("group_by", "add_host")
                                   for t in walk_tasks(list(play.tasks) + list(play.handlers)))
        check_connections(inventory, hosts, extra_vars, playbook.dir)
        inv_names: set = set()
        for host in hosts:
            host_vars = inventory.get_vars(host)
            inv_names |= set(host_vars)
            check_inventory_templates(templar, inventory, host, host_vars, seen_templates)
        runtime |= _runtime_names(play, modules, playbook.dir)
        known = (extra | set(play.vars) | inv_names | runtime | FACT_NAMES | MAGIC_VARS
                 | {k for f in files for k in f})
        handlers = {h.name for h in play.handlers if h.name} | {n for h in play.handlers for n in h.listen}
        _refuse_unread_handlers(play)
        checker = _Checker(templar, handlers, modules)
        checker.check_vars(play.vars, known, play.key_where("vars"))
        for f in files:
            checker.check_vars(f, known, f.where)
        for task in walk_tasks(list(play.tasks) + list(play.handlers)):
            if task.module is not None:
                if task.module not in modules:
                    raise BadInput(f"unknown module '{task.module}'", where=task.key_where(task.module))
                check_args(task, modules)
            target = task.delegate_to
            if (target is not None and not adds_hosts and not Templar.is_template(target)
                    and target not in ("localhost", "127.0.0.1")
                    and target not in getattr(inventory, "hosts", {target: None})):
                raise BadInput(f"delegate_to {target!r} is not a host of the inventory",
                               where=task.key_where("delegate_to"))
        for f in play.role_var_files:
            checker.names(f)
        for task in play.tasks:
            checker.task(task, known, frozenset())
        for task in play.handlers:
            checker.task(task, known, frozenset())
