"""Ansible's linear strategy inside one batch: each task on every live host at once (the
run's --forks threads), the next when all are done; blocks, meta tasks, run_once, facts.

What one task does on one host is engine/taskrun.py; this file decides which hosts run it,
collects their outcomes and turns them into counters and events.
"""
from __future__ import annotations

import copy
import time
from typing import Any

from fleetops.engine import recap
from fleetops.engine import secrets as _secrets
from fleetops.engine.handlers import run_handlers
from fleetops.engine.includerun import run_include
from fleetops.engine.playbook.model import Task
from fleetops.engine.playcontext import PlayContext, task_label
from fleetops.engine.tags import tags_match
from fleetops.engine.runcontext import Frame, RunContext
from fleetops.engine.taskrun import NO_LOG, GatherFacts, TaskRunner, censored, facts_task, record


def _scrub_value(value: Any, values: set) -> Any:
    if isinstance(value, str):
        return _secrets.scrub(value, values)
    if isinstance(value, dict):
        return {k: _scrub_value(v, values) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub_value(v, values) for v in value]
    return value


class TaskLoop:
    """Runs task lists over a batch's hosts for `run` (the executor's run: events, pool, state)."""

    def __init__(self, run: RunContext):
        self.run = run

    def run_list(self, pctx: PlayContext, tasks: Any, hosts: list, frame: Frame) -> list:
        """Run tasks in order over `hosts`; returns the hosts still running (not failed/unreachable)."""
        run = self.run
        live = list(hosts)
        for task in tasks or ():
            if not live or pctx.abort or run.stopped():
                break
            if task.dynamic is not None:
                if tags_match(task.tags, run.options.tags, run.options.skip_tags):
                    live = run_include(self, pctx, task, live, frame)
                continue
            if task.block is not None:
                live = self._run_block(pctx, task, live, frame)
                continue
            if task.implicit:
                live = self.run_handlers(pctx, live)       # the flush between play sections
                continue
            if not tags_match(task.tags, run.options.tags, run.options.skip_tags):
                continue
            out = self.run_task(pctx, task, live, frame)
            live = [h for h in live if out.get(h) not in ("failed", "rescued", "unreachable")]
            if task.module == "meta":
                live = self._meta(pctx, task, live, out)
        return live

    def run_handlers(self, pctx: PlayContext, live: list) -> list:
        return run_handlers(pctx, live, self.run.state, self._run_handler, self.run.stopped)

    def _run_handler(self, pctx: PlayContext, handler: Any, targets: list, frame: Frame) -> dict:
        """One notified handler on its hosts; an include_tasks handler runs its tasks."""
        if handler.block is None and handler.dynamic is None:
            return self.run_task(pctx, handler, targets, frame)
        ok = set(self.run_list(pctx, [handler], targets, frame))
        return {h: "ok" if h in ok else "failed" for h in targets}

    def _meta(self, pctx: PlayContext, task: Task, live: list, out: dict) -> list:
        """Carry out a meta task for the hosts it ran on (not skipped by its `when`)."""
        action = str((task.args or {}).get("cmd"))
        acted = [h for h in live if out.get(h) == "ok"]
        if not acted:
            return live
        if action == "flush_handlers":
            return self.run_handlers(pctx, live)
        if action == "end_host":
            pctx.ended |= set(acted)
            return [h for h in live if h not in acted]
        if action in ("end_batch", "end_play"):
            pctx.ended |= set(pctx.batch)
            pctx.end_play = pctx.end_play or action == "end_play"
            return []
        return live

    def _run_block(self, pctx: PlayContext, block: Task, hosts: list, frame: Frame) -> list:
        """block/rescue/always: rescue takes the hosts that failed in block; always runs for all."""
        state = self.run.state
        ok = self.run_list(pctx, block.block, hosts, Frame(rescuable=frame.rescuable or bool(block.rescue)))
        if pctx.abort or self.run.stop.is_set():
            return ok
        failed = [h for h in hosts if h not in ok and not state(h).unreachable]
        keep = set(ok)
        if block.rescue and failed:
            keep |= set(self.run_list(pctx, block.rescue, failed, Frame(rescuable=frame.rescuable)))
        if block.always:
            targets = [h for h in hosts if not state(h).unreachable]
            keep &= set(self.run_list(pctx, block.always, targets, Frame(rescuable=frame.rescuable)))
        return [h for h in hosts if h in keep]

    def run_task(self, pctx: PlayContext, task: Task, live: list, frame: Frame) -> dict:
        """Run `task` on every host of `live` in parallel; host -> outcome."""
        run = self.run
        tindex = pctx.index_of.get(id(task), -1)
        name = task_label(task)
        run.events.task_start(pctx.index, tindex, name, task.module, list(live))
        pctx.active = run.live_hosts(pctx, live)
        if getattr(run.modules.get(task.module or ""), "bypass_host_loop", False) and live:
            futures = [run.pool.submit(self._host_task, pctx, task, live[0], frame)]   # the others get no result
        elif task.run_once:
            futures = [run.pool.submit(self._host_task_once, pctx, task, list(live), frame)]
        else:
            futures = [run.pool.submit(self._host_task, pctx, task, h, frame) for h in live]
        outcomes: dict = {}
        for fut in futures:
            outcomes.update(fut.result())
        if pctx.play.any_errors_fatal and not pctx.abort:
            bad = [h for h in live if outcomes.get(h) in ("failed", "unreachable")]
            if bad:
                pctx.abort = f"any_errors_fatal: task '{name}' failed on {', '.join(bad)}"
        return outcomes

    def _host_task(self, pctx: PlayContext, task: Task, host: str, frame: Frame) -> dict:
        if self.run.stop.is_set():
            return {host: None}      # interrupted before this host started: nothing ran
        name = task_label(task)
        self.run.events.host_task_start(host, name)
        started = time.time()
        res, secret_values = self._compute(pctx, task, host, frame)
        ended = time.time()
        return {host: self.finish(pctx, host, task, frame, res, started, ended, secret_values)}

    def _host_task_once(self, pctx: PlayContext, task: Task, hosts: list, frame: Frame) -> dict:
        """run_once: the first reachable host runs it; its result applies to every host."""
        out: dict = {}
        for i, host in enumerate(hosts):
            if self.run.stop.is_set():
                return out
            self.run.events.host_task_start(host, task_label(task))
            started = time.time()
            res, secret_values = self._compute(pctx, task, host, frame)
            ended = time.time()
            if res.get("unreachable") and i + 1 < len(hosts):
                out[host] = self.finish(pctx, host, task, frame, res, started, ended, secret_values)
                continue
            hidden = res.get(NO_LOG)
            out[host] = self.finish(pctx, host, task, frame, res, started, ended, secret_values)
            for other in hosts[i + 1:]:
                copied = copy.deepcopy(res)
                copied["run_once_host"] = host
                if hidden:
                    copied[NO_LOG] = True
                out[other] = self.finish(pctx, other, task, frame, copied, started, ended, secret_values)
            return out
        return out

    def _compute(self, pctx: PlayContext, task: Task, host: str, frame: Frame) -> tuple:
        runner = TaskRunner(self.run, pctx, host, task, frame)
        return runner.execute(), runner.secrets

    def finish(self, pctx: PlayContext, host: str, task: Task, frame: Frame, res: dict, started: float,
                ended: float, secret_values: set) -> str:
        """The host's state (taskrun.record), its counters, the events. Returns the host's outcome."""
        run = self.run
        st = run.state(host)
        hidden = bool(res.pop(NO_LOG, False))
        with run.lock:
            outcome = record(run, host, task, frame, res, started, ended, secret_values)
            recap.count(run.stats.setdefault(host, recap.zero()), res)
        if outcome == "unreachable" and st.transport is not None:
            try:
                st.transport.close()
            except Exception:  # noqa: BLE001
                pass
        if task.module == GatherFacts.name and outcome == "ok":
            run.events.host_facts(host, res["ansible_facts"])
        shown = censored(res) if hidden else _scrub_value(res, secret_values) if secret_values else res
        run.events.host_result(host, pctx.index, pctx.index_of.get(id(task), pctx.facts_index),
                               task_label(task), task.module, shown, started, ended)
        return outcome

    def gather(self, pctx: PlayContext, live: list) -> list:
        """The play's fact gathering, as a task of its own; returns the hosts that got facts."""
        run = self.run
        task = facts_task(pctx.play)
        run.events.task_start(pctx.index, pctx.facts_index, task_label(task), GatherFacts.name, list(live))
        pctx.active = run.live_hosts(pctx, live)
        futures = [run.pool.submit(self._host_task, pctx, task, h, Frame()) for h in live]
        outcomes: dict = {}
        for fut in futures:
            outcomes.update(fut.result())
        if pctx.play.any_errors_fatal:
            bad = [h for h in live if outcomes.get(h) in ("failed", "unreachable")]
            if bad:
                pctx.abort = f"any_errors_fatal: gathering facts failed on {', '.join(bad)}"
        return [h for h in live if outcomes.get(h) not in ("failed", "unreachable")]
