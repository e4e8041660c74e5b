"""Load, validate and execute one playbook with the results store and a view attached.

`fleetops run` and the shortcut commands built on playbooks (`fleetops audit`) share this
one path, so validation, secrets, Ctrl-C handling and the results store behave the same
whichever command started the run.
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from dataclasses import dataclass, field

from fleetops.errors import EXIT_INTERRUPTED, BadInput

EXIT_UNEXPECTED = 1


@dataclass
class Loaded:
    """A playbook and inventory that passed validation: nothing has contacted a host yet."""

    playbook: object
    inventory: object
    extra_vars: dict
    secret_values: set
    modules: dict          # name -> Module class: what the playbook was validated against and runs with


@dataclass
class Finished:
    run_id: str
    exit_code: int
    store: object
    view: object
    outcome: object = None
    notes: list = field(default_factory=list)


def secret_values(inventory, extra_vars: dict, playbook=None) -> set:
    """Values of secret-named variables (inventory, -e, play vars, `environment`) to scrub from all output."""
    from fleetops.engine.playbook import walk_tasks
    from fleetops.engine.secrets import collect_secret_values

    values = set(collect_secret_values(extra_vars or {}))
    for host in inventory.hosts:
        values |= collect_secret_values(inventory.get_vars(host) or {})
    for play in playbook.plays if playbook is not None else ():
        values |= collect_secret_values(play.vars or {})
        parts = list(play.environment) + [p for t in walk_tasks(list(play.tasks) + list(play.handlers))
                                          for p in t.environment]
        for part in parts:                  # environment: {API_TOKEN: literal}
            if isinstance(part, dict):
                values |= collect_secret_values(part)
    return values


def load(playbook_path: str, inventory_path: str, extra_vars: dict, limit: str | None = None,
         note_secrets=None, ansible_cfg=None, *, modules: dict) -> Loaded:
    """Inventory, playbook, validation against `modules` (name -> Module class, the composed
    registry's, given by the caller): any problem is BadInput (exit 4), no host contacted.

    `note_secrets(values)` is told the secret values as soon as they are known, so an error
    line about a later step can already be scrubbed of them.
    """
    from fleetops.engine.connection.transport import ConnDefaults
    from fleetops.engine.inventory import load_inventory
    from fleetops.engine.lint import check_playbook
    from fleetops.engine.playbook import load_playbook
    from fleetops.engine.validate import validate

    note = note_secrets or (lambda values: None)
    for path, what in ((playbook_path, "playbook"), (inventory_path, "inventory")):
        if not os.path.exists(path):
            raise BadInput(f"{what} not found", where=path)
        if not os.access(path, os.R_OK):
            raise BadInput(f"{what} is not readable", where=path)
    defaults = None if ansible_cfg is None else ConnDefaults(     # below every host variable
        remote_user=ansible_cfg.remote_user, timeout=ansible_cfg.timeout,
        private_key_file=ansible_cfg.private_key_file, ssh_args=list(getattr(ansible_cfg, "ssh_args", [])))
    inventory = load_inventory(inventory_path, defaults)
    note(secret_values(inventory, extra_vars))
    if limit and not inventory.select(limit):
        raise BadInput(f"--limit {limit!r} matches no host", where=inventory_path)
    roles_path = ansible_cfg.roles_path if ansible_cfg else ()
    playbook = load_playbook(playbook_path, modules, roles_path) if roles_path else load_playbook(playbook_path, modules)
    validate(playbook, inventory, extra_vars, modules)
    for line in check_playbook(playbook, modules):
        print(f"fleetops: warning: {line}", file=sys.stderr, flush=True)
    values = secret_values(inventory, extra_vars, playbook)
    note(values)
    return Loaded(playbook, inventory, extra_vars, values, modules)


DESCRIPTORS_PER_HOST = 4     # the SSH socket, a channel's wake-up pipe, the run lock's channel, slack
DESCRIPTORS_BASE = 256       # the results store, logs, the interpreter's own


def ensure_descriptors(hosts: int) -> int:
    """Raise the soft open-files limit far enough for a connection per host, or refuse clearly.

    Every host keeps one SSH connection for the whole run, so 1,000 hosts need a few thousand
    descriptors where many systems start a process with a soft limit of 1,024. Returns the limit
    in force; BadInput (nothing contacted) when even the hard limit is too low.
    """
    import resource

    need = DESCRIPTORS_BASE + DESCRIPTORS_PER_HOST * hosts
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return soft
    if hard != resource.RLIM_INFINITY and hard < need:
        raise BadInput(f"{hosts} hosts need about {need} open files and this process may open at most {hard} "
                       f"(ulimit -Hn); raise the hard limit (ulimit -n {need} as root, LimitNOFILE= in a unit, "
                       f"nofile in limits.conf) or run on fewer hosts (--limit)", where="ulimit -n")
    new = need if hard == resource.RLIM_INFINITY else min(hard, max(need, soft * 2))
    resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    return new


def execute(loaded: Loaded, options, *, json_output: bool, console=None, sinks=(), view: str = "auto",
            document: bool = True) -> Finished:
    """Run with the results store and the live view (or the --json collector) listening.
    `document=False`: the caller prints its own --json document from its own sinks, so no copy
    of every result is collected for one (at a thousand hosts that copy is most of the memory).

    Ctrl-C once: start no new task, let running ones finish, record the run interrupted.
    Twice: quit now, still recording it interrupted. With json_output, stdout is kept for
    the caller's one document: anything printed during the run goes to stderr.
    """
    from fleetops.engine.events import Fanout
    from fleetops.engine.executor import run_playbook
    from fleetops.engine.results import ResultsStore, new_run_id
    from fleetops.engine.results_backend import url_secrets

    ensure_descriptors(len(loaded.inventory.select(options.limit or "all")))
    secrets = loaded.secret_values | (url_secrets(options.results_db) if options.results_db else set())
    store = ResultsStore(options.results_dir, secret_values=secrets, db_url=options.results_db)
    if json_output and not document:
        from fleetops.engine.events import EventSink
        view = EventSink()
    elif json_output:
        from fleetops.display import JsonCollector
        view = JsonCollector(secret_values=secrets, results_dir=options.results_dir)
    else:
        from fleetops.display import LiveDisplay
        view = LiveDisplay(console=console, secret_values=secrets, results_dir=store.location, view=view)
    run_id = new_run_id()
    stop = threading.Event()
    presses = [0]

    def on_sigint(signum, frame):
        presses[0] += 1
        if presses[0] == 1:
            stop.set()
            print("fleetops: interrupted: starting no new tasks, letting running ones finish"
                  " (Ctrl-C again to quit now)", file=sys.stderr, flush=True)
            return
        if hasattr(view, "stop_live"):
            view.stop_live()
        store.mark_interrupted(run_id, EXIT_INTERRUPTED)
        print("fleetops: interrupted: quit now; the run is recorded as interrupted", file=sys.stderr, flush=True)
        os._exit(EXIT_INTERRUPTED)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        redirect = contextlib.redirect_stdout(sys.stderr) if json_output else contextlib.nullcontext()
        with redirect:
            try:
                outcome = run_playbook(loaded.playbook, loaded.inventory, options,
                                       Fanout(store, view, *sinks), run_id, loaded.modules, stop=stop)
            except BaseException:
                if hasattr(view, "stop_live"):
                    view.stop_live()
                store.mark_interrupted(run_id, EXIT_INTERRUPTED if stop.is_set() else EXIT_UNEXPECTED)
                raise
    finally:
        signal.signal(signal.SIGINT, previous)
    return Finished(run_id, int(outcome.exit_code), store, view, outcome)
