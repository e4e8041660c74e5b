"""Handlers: run at a flush for the hosts that notified them, in definition order, once each.

Kept apart from the task loop because what runs is decided by notifications, not by the list.
"""
from __future__ import annotations

from typing import Any, Callable

from fleetops.engine.playcontext import PlayContext
from fleetops.engine.runcontext import Frame, HostState

RunTask = Callable[[PlayContext, Any, list, Frame], dict]


def run_handlers(pctx: PlayContext, live: list, state: Callable[[str], HostState], run_task: RunTask,
                 stopped: Callable[[], bool]) -> list:
    """Notified handlers, in definition order, once per host; `listen` topics too.

    Returns the hosts still running; `run_task` runs one handler on its hosts (host -> outcome)."""
    for handler in pctx.play.handlers or ():
        if not live or pctx.abort or stopped():
            break
        names = {n for n in [handler.name] + list(handler.listen or []) if n}
        targets = [h for h in live if state(h).notified & names]
        if not targets:
            continue
        out = run_task(pctx, handler, targets, Frame())
        for h in targets:
            state(h).notified -= names
        live = [h for h in live if out.get(h) not in ("failed", "rescued", "unreachable")]
    return live
