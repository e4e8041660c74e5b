"""The module contract: what a module declares, what the engine hands it, what it returns.

Arguments are declared in `args` so a playbook is validated (unknown argument, wrong type,
missing required) before any host is contacted. The engine never imports a module: the
modules a run may use are given to it, by name (`by_name`).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Protocol, TypedDict

from fleetops.engine.boolean import boolean
from fleetops.errors import BadInput
from fleetops.engine.templating import Templar
from fleetops.engine.connection.transport import Transport


class Result(TypedDict, total=False):
    """A payload's (and a module's) result: the contract keys, then the payload's own data."""

    changed: bool
    failed: bool
    skipped: bool
    msg: str
    unreachable: bool             # set by the engine: the connection was lost
    results: list                 # one result per loop item
    ansible_facts: dict           # set as host facts for the rest of the run
    payload_seconds: float        # the round trip, measured on the controller
    rc: int                       # a payload that did not finish: its exit status and stderr tail
    stderr: str


class Payload(Protocol):
    def __call__(self, name: str, args: dict, timeout: Optional[float] = None) -> Result: ...


@dataclass
class Arg:
    type: type | tuple = str      # str, int, float, bool, dict, list, or a tuple of them
    required: bool = False
    default: Any = None
    choices: tuple | None = None
    secret: bool = False          # never echoed in results or logs


def _no_scrub(text: str) -> str:
    return text


@dataclass
class TaskContext:
    """One task on one host, as a module sees it.

    `payload(name, args)` runs fleetops/remote/<name>.py on the host with become applied and
    the run's `_check`/`_diff` added: a module passes only its own arguments.
    """

    host: str                     # inventory hostname
    transport: Optional[Transport]  # already connected; None for a module that runs on the controller
    variables: dict               # all variables visible to the task (facts included)
    check: bool                   # check mode: report, change nothing
    diff: bool                    # --diff: include unified diffs where files are edited
    host_dir: str                 # <results>/<run-id>/<host>/ for fetched files and reports
    payload: Payload              # payload(name, args, timeout=None) -> result dict (one round trip)
    project_dir: str              # where playbook-relative files (templates/, files/) resolve from
    templar: Templar = field(default_factory=Templar)
    run_id: str = ""
    become_user: Optional[str] = None   # the task runs as this user through sudo (None: the login user)
    role_path: Optional[str] = None     # the task's role directory: its files/ and templates/ come first
    scrub: Callable[[str], str] = _no_scrub   # removes the run's secret values from a text
    delegate_to: Optional[str] = None   # the inventory host (or localhost) the task runs on instead
    task: Any = None                    # the playbook's Task (its file, for files relative to it)
    stop: threading.Event = field(default_factory=threading.Event)   # set when the run is interrupted
    async_job: Any = None               # engine/asyncjob.AsyncJob when the task has `async:`
    environment: dict = field(default_factory=dict)   # `environment`, rendered: what the host's programs see


class Module:
    """Subclass, set `name` and `args`, optionally `free_form`, implement run."""

    name: str = ""
    args: dict[str, Arg] = {}
    free_form: bool = False       # command/shell: `command: echo hi` sets args["cmd"]
    runs_on_controller: bool = False  # set_fact, debug, assert: no connection needed
    any_args: bool = False        # set_fact: every key is accepted (a variable name), `args` lists the special ones
    uses_become: bool = True      # False: runs as the login user even when the task or host has become
    condition_args: tuple = ()    # assert's `that`: bare conditions, checked as `when:` is before the run
    bypass_host_loop: bool = False  # add_host: once per task, on the first host (ansible-core's BYPASS_HOST_LOOP)

    @classmethod
    def check_static(cls, args: dict, where: str) -> None:
        """Refuse (BadInput) an argument whose meaning is known before any template is rendered."""

    def run(self, ctx: TaskContext, args: dict) -> dict:
        raise NotImplementedError


def flag(value: Any) -> bool:
    """A module's on/off argument as it arrives at run time (a template renders to a string):
    the one boolean rule, with a word it does not know false."""
    return boolean(value, strict=False)


def one_of(args: Any, names: tuple, module: str, where: str) -> str:
    """Which of `names` (an argument and its aliases, ansible-core's `path`/`dest`/`name`) the
    task gave: exactly one, or BadInput at the task (none) or at the second one's key (two)."""
    given = [k for k in names if args.get(k) is not None]
    if not given:
        raise BadInput(f"module '{module}' needs argument '{names[0]}' (or its alias '{names[1]}')", where=where)
    if len(given) > 1:
        kw = args.key_where(given[1]) if hasattr(args, "key_where") else where
        raise BadInput(f"{module}: '{given[0]}' and '{given[1]}' are the same argument; give one", where=kw)
    return given[0]


def result(changed: bool = False, failed: bool = False, msg: str = "", skipped: bool = False, **extra) -> dict:
    """Build a module contract dict."""
    out = {"changed": bool(changed), "failed": bool(failed), "skipped": bool(skipped), "msg": msg}
    out.update(extra)
    return out


Resolver = Callable[[str], Optional[type[Module]]]
_BUILTIN = ("ansible.builtin.", "ansible.legacy.")


class ModuleTable(dict):
    """name -> Module class, and a resolver asked for a name the table has not (the ansible-core
    bridge, fleetops/modules/bridge): what it answers looks like any other module to the engine.

    A name whose `ansible.builtin.` form or short form is native is never resolved, so the native
    module stays the default; iterating the table lists the native modules only."""

    def __init__(self, native=(), resolver: Optional[Resolver] = None):
        super().__init__(native)
        self.resolver = resolver
        self._resolved: dict[str, Optional[type[Module]]] = {}
        self._lock = threading.Lock()

    def _resolve(self, name) -> Optional[type[Module]]:
        if self.resolver is None or not isinstance(name, str) or not name:
            return None
        short = next((name[len(p):] for p in _BUILTIN if name.startswith(p)), name)
        if dict.__contains__(self, short):
            return None
        with self._lock:
            if name not in self._resolved:
                self._resolved[name] = self.resolver(name)
            return self._resolved[name]

    def __missing__(self, name):
        found = self._resolve(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or self._resolve(name) is not None

    def get(self, name, default=None):
        if dict.__contains__(self, name):
            return dict.__getitem__(self, name)
        found = self._resolve(name)
        return default if found is None else found



def with_modules(modules: dict, classes: Iterable[type[Module]]) -> dict:
    """`modules` with `classes` set under their names, keeping a ModuleTable's resolver."""
    added = {**modules, **{cls.name: cls for cls in classes}}
    if isinstance(modules, ModuleTable):
        return ModuleTable(added, modules.resolver)
    return added


def by_name(classes: Iterable[type[Module]]) -> dict[str, type[Module]]:
    """name -> Module class. Raises RuntimeError when two classes claim the same name."""
    found: dict[str, type[Module]] = {}
    for cls in classes:
        other = found.get(cls.name)
        if other is not None and other is not cls:
            raise RuntimeError(f"module name {cls.name!r} is claimed by {other.__module__} and {cls.__module__}")
        found[cls.name] = cls
    return found
