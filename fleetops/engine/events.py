"""Run events: the executor emits them, the display, JSON output and results store consume them.

Keeping output out of the executor means the terminal view, `--json` and the
central results are three listeners on one stream and can never disagree.
"""
from __future__ import annotations


class EventSink:
    """Base listener: every method is a no-op; subclasses override what they need.

    All methods may be called from worker threads; implementations must lock.
    `result` dicts follow the module contract (changed, failed, skipped, msg, ...)
    plus the executor's keys: `unreachable`, `rescued`, `ignored`, `duration`.
    """

    def run_start(self, run_id: str, playbook: str, inventory: str, options: dict) -> None: ...
    def play_start(self, play_index: int, play_name: str, hosts: list) -> None: ...
    def batch_start(self, play_index: int, batch_index: int, hosts: list) -> None: ...
    def task_start(self, play_index: int, task_index: int, task_name: str, module: str | None, hosts: list) -> None: ...
    def host_task_start(self, host: str, task_name: str) -> None: ...
    def host_result(self, host: str, play_index: int, task_index: int, task_name: str,
                    module: str | None, result: dict, started: float, ended: float) -> None: ...
    def host_facts(self, host: str, facts: dict) -> None: ...
    def play_end(self, play_index: int, stopped_reason: str | None) -> None: ...
    def run_end(self, status: str, stats: dict, exit_code: int) -> None:
        """status: ok | failed | unreachable | interrupted. stats: host -> counters dict."""


class Fanout(EventSink):
    """Forwards every event to several sinks, in order."""

    def __init__(self, *sinks: EventSink):
        self.sinks = [s for s in sinks if s is not None]

    def __getattribute__(self, name):
        if name.startswith("_") or name in ("sinks",):
            return object.__getattribute__(self, name)
        if hasattr(EventSink, name):
            sinks = object.__getattribute__(self, "sinks")

            def call(*args, **kwargs):
                for sink in sinks:
                    getattr(sink, name)(*args, **kwargs)
            return call
        return object.__getattribute__(self, name)
