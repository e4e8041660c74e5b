"""The module contract, shared by generic and Hermes modules.

Arguments are declared in `args` so a playbook is validated (unknown argument,
wrong type, missing required) before any host is contacted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Arg:
    type: type | tuple = str      # str, int, float, bool, dict, list, or a tuple of them
    required: bool = False
    default: Any = None
    choices: tuple | None = None
    secret: bool = False          # never echoed in results or logs


@dataclass
class TaskContext:
    host: str                     # inventory hostname
    transport: Any                # fleetops.engine.connection.transport.Transport (already connected)
    variables: dict               # all variables visible to the task (facts included)
    check: bool                   # check mode: report, change nothing
    diff: bool                    # --diff: include unified diffs where files are edited
    host_dir: str                 # <results>/<run-id>/<host>/ for fetched files and reports
    payload: Callable[..., dict]  # payload(module_name, args) -> result dict (one round trip)
    project_dir: str              # where playbook-relative files (templates/, files/) resolve from
    templar: Any = None           # fleetops.engine.templating.Templar
    extra: dict = field(default_factory=dict)


class Module:
    """Subclass, set `name`, `args`, optionally `free_form` and `check_mode_support`, implement run."""

    name: str = ""
    args: dict[str, Arg] = {}
    free_form: bool = False       # command/shell: `command: echo hi` sets args["cmd"]
    runs_on_controller: bool = False  # set_fact, debug, assert: no connection needed
    any_args: bool = False        # set_fact: every key is accepted (a variable name), `args` lists the special ones

    def run(self, ctx: TaskContext, args: dict) -> dict:
        raise NotImplementedError


def result(changed: bool = False, failed: bool = False, msg: str = "", skipped: bool = False, **extra) -> dict:
    """Build a module contract dict."""
    out = {"changed": bool(changed), "failed": bool(failed), "skipped": bool(skipped), "msg": msg}
    out.update(extra)
    return out
