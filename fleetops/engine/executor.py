"""The executor: runs a playbook's plays over the fleet with Ansible's linear strategy.

Per play: hosts from the pattern (and --limit), split into `serial` batches
(engine/batches.py); within a batch each task runs on every live host at once
(engine/tasklist.py, `forks` worker threads) and the next task starts when all
are done, so an operator can reason about a run exactly as with Ansible. Output
is events only (engine/events.py): the display, --json and the results store
listen. Hosts and their connections are engine/hostpool.py, the variables
engine/playvars.py, one task on one host engine/taskrun.py.
"""
from __future__ import annotations

import concurrent.futures
import os
import threading
import uuid
from dataclasses import dataclass
from typing import Any

from fleetops.engine import recap
from fleetops.engine import results_backend as _results_backend
from fleetops.engine import secrets as _secrets
from fleetops.engine.batches import BatchGate, LocalBatches, order_hosts
from fleetops.engine.events import EventSink
from fleetops.engine.hostpool import HostPool
from fleetops.engine.module import Result, with_modules
from fleetops.engine.payload import run_payload
from fleetops.engine.connection.transport import Transport
from fleetops.engine.playcontext import PlayContext
from fleetops.engine.playvars import RunVars
from fleetops.engine.runcontext import Frame, HostState, RunOptions
from fleetops.engine.taskrun import GatherFacts
from fleetops.engine.tasklist import TaskLoop
from fleetops.engine.templating import Templar
from fleetops.engine.varsfile import load_vars_file
from fleetops.errors import EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNREACHABLE, BadInput


@dataclass
class RunOutcome:
    run_id: str
    status: str          # ok | failed | unreachable | interrupted
    exit_code: int
    stats: dict          # host -> {ok, changed, unreachable, failed, skipped, rescued, ignored}


class _Run:
    """One run: the play loop, and the `RunContext` the task loop, the task runner and includes
    are given; its hosts are the `HostPool`'s and its variables the `RunVars`', asked for by name."""

    def __init__(self, playbook, inventory, options: RunOptions, events: EventSink, run_id: str,
                 modules: dict, stop: threading.Event | None, transport_factory):
        self.playbook = playbook
        self.inventory = inventory
        self.options = options
        self.events = events or EventSink()
        self.run_id = run_id
        self.stop = stop if stop is not None else threading.Event()
        if transport_factory is None:
            from fleetops.engine.connection.ssh import SSHTransport
            transport_factory = SSHTransport
        self.templar = Templar()
        self.modules = with_modules(modules, (GatherFacts,))
        self.playbook_dir = playbook.dir
        self.omit = f"__omit_place_holder__{uuid.uuid4().hex}"
        self.lock = threading.RLock()
        self.stats: dict[str, dict] = {}
        self.interrupted = False
        self.hostpool = HostPool(inventory, options, self.templar, self.playbook_dir, run_id, transport_factory,
                                 self.lock)
        self.vars = RunVars(inventory, options, self.hostpool.state, self.playbook_dir, run_id, self.omit,
                            self.lock)
        self.tasks = TaskLoop(self)
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, int(options.forks or 1)),
                                                          thread_name_prefix="fleetops-fork")

    def run(self) -> RunOutcome:
        """Every play in order, between the run_start and run_end events; the forks and every host's
        connection are closed whatever happens."""
        opts = {
            "limit": self.options.limit, "tags": sorted(self.options.tags or ()),
            "skip_tags": sorted(self.options.skip_tags or ()),
            "extra_vars": _secrets.mask(dict(self.options.extra_vars or {})),
            "forks": self.options.forks, "check": self.options.check, "diff": self.options.diff,
            "accept_new_host_keys": self.options.accept_new_host_keys,
            "results_dir": self.options.results_dir, "known_hosts": self.options.known_hosts,
        }
        if self.options.results_db:
            opts["results_db"] = _results_backend.redact(self.options.results_db)
        self.events.run_start(self.run_id, str(self.playbook.path), str(self.inventory.path), opts)
        try:
            for index, play in enumerate(self.playbook.plays):
                if self.stopped():
                    break
                if self._run_play(index, play):
                    break
        finally:
            self.pool.shutdown(wait=True)
            self.hostpool.close_all()
        if self.interrupted:
            status, code = "interrupted", EXIT_INTERRUPTED
        elif any(st.failed for st in self.hostpool.hosts.values()):
            status, code = "failed", EXIT_HOST_FAILED
        elif any(st.unreachable for st in self.hostpool.hosts.values()):
            status, code = "unreachable", EXIT_UNREACHABLE
        else:
            status, code = "ok", EXIT_OK
        stats = {h: dict(s) for h, s in self.stats.items()}
        self.events.run_end(status, stats, code)
        return RunOutcome(run_id=self.run_id, status=status, exit_code=code, stats=stats)

    def stopped(self) -> bool:
        """The run was asked to stop (Ctrl-C): from now on it counts as interrupted."""
        if self.stop.is_set():
            self.interrupted = True
            return True
        return False

    def _play_hosts(self, play) -> list:
        """The play's hosts (its pattern within --limit) not failed or unreachable yet, in its `order`."""
        hosts = self.inventory.select(play.hosts)
        if self.options.limit:
            allowed = set(self.inventory.select(self.options.limit))
            hosts = [h for h in hosts if h in allowed]
        hosts = [h for h in hosts if not (self.state(h).failed or self.state(h).unreachable)]
        return order_hosts(hosts, play.order)

    def _run_play(self, index: int, play) -> bool:
        """Run one play; True when the whole run must stop (abort or interrupt)."""
        if play.limit_templates and not play.limits_resolved:  # never cut batches from an unrendered template
            raise BadInput("templated serial/max_fail_percentage was not resolved (validate() the playbook first)",
                           where=play.where)
        gate: BatchGate = self.options.batch_gate or LocalBatches()
        batches = gate.plan(index, play, self._play_hosts(play), self.stop.is_set)
        hosts = [h for batch in batches for h in batch]
        self.events.play_start(index, play.name or play.hosts, list(hosts))
        if not batches:
            gate.finish(index, None)
            self.events.play_end(index, "no hosts matched")
            return False
        for h in hosts:
            self.stats.setdefault(h, recap.zero())
        pctx = PlayContext(play=play, index=index, hosts=hosts)
        pctx.number_tasks()
        try:
            pctx.vars_files = self._load_vars_files(play)
        except (BadInput, OSError) as e:
            for h in hosts:
                self.state(h).failed = True
                self.stats[h]["failed"] += 1
            gate.finish(index, f"vars_files: {e}")
            self.events.play_end(index, f"vars_files: {e}")
            return True

        reason = None
        for bindex, batch in enumerate(batches):
            if self.stopped():
                reason = "interrupted"
                break
            reason = pctx.abort = gate.before(index, bindex)
            if reason:
                break
            pctx.batch, pctx.active = list(batch), None
            live = self._run_batch(pctx, play, bindex) if batch else []
            for h in batch:
                st = self.state(h)
                st.notified.clear()
                if h not in live and not st.unreachable and h not in pctx.ended:
                    st.failed = True
            if pctx.end_play:
                break
            if pctx.abort:
                reason = pctx.abort
                break
            if self.stopped():
                reason = "interrupted"
                break
            failed = [h for h in batch if self.state(h).failed]
            unreachable = [h for h in batch if self.state(h).unreachable and not self.state(h).failed]
            verdict = gate.after(index, bindex, batch, failed, unreachable)
            if verdict:
                reason = pctx.abort = verdict
                break
        gate.finish(index, reason)
        self.events.play_end(index, reason)
        return bool(pctx.abort) or self.interrupted

    def _run_batch(self, pctx: PlayContext, play, bindex: int) -> list:
        """One batch's tasks and handlers; the hosts still live at its end."""
        self.events.batch_start(pctx.index, bindex, list(pctx.batch))
        live = list(pctx.batch)
        if play.gather_facts:
            live = self.tasks.gather(pctx, live)
        live = self.tasks.run_list(pctx, play.tasks, live, Frame())
        if not pctx.abort and not self.stop.is_set():
            live = self.tasks.run_handlers(pctx, live)
        return live

    def _load_vars_files(self, play) -> dict:
        out: dict = {}
        if not play.vars_files:
            return out
        for path in play.vars_files:
            full = path if os.path.isabs(path) else os.path.join(self.playbook_dir, path)
            data = load_vars_file(full)
            if data is None:
                continue
            if not isinstance(data, dict):
                raise BadInput("a vars file must hold a mapping", where=full)
            out.update(data)
        return out

    def state(self, host: str) -> HostState:
        """The host's state, the HostPool's (this and the methods below answer RunContext)."""
        return self.hostpool.state(host)

    def transport_for(self, host: str, delegated: bool, remote_user: str | None = None,
                      connection: str | None = None) -> Transport:
        return self.hostpool.transport_for(host, delegated, remote_user, connection)

    def inventory_become(self, host: str) -> bool:
        return self.hostpool.inventory_become(host)

    def inventory_become_user(self, host: str) -> str | None:
        return self.hostpool.inventory_become_user(host)

    def task_vars(self, pctx: PlayContext, host: str, task: Any, frame: Frame, check: bool) -> dict:
        return self.vars.task_vars(pctx, host, task, frame, check)

    def secret_values(self, variables: dict) -> set:
        return self.vars.secret_values(variables)

    def live_hosts(self, pctx: PlayContext, live: list | None = None) -> tuple:
        return self.vars.live_hosts(pctx, live)

    def groups_changed(self, host: str) -> None:
        self.vars.groups_changed(host)

    def payload(self, transport: Transport, name: str, args: dict, python=None, become_user=None, timeout=None,
                low_priority: bool = True, environment: dict | None = None) -> Result:
        return run_payload(transport, name, args, python=python, become_user=become_user, timeout=timeout,
                           low_priority=low_priority, environment=environment)

    def host_dir(self, host: str) -> str:
        return os.path.join(os.path.abspath(self.options.results_dir), self.run_id, host)


def run_playbook(playbook, inventory, options: RunOptions, events: EventSink, run_id: str,
                 modules: dict, stop: threading.Event | None = None, transport_factory=None) -> RunOutcome:
    """Run every play of `playbook` on `inventory` with `modules` (name -> Module class); events
    go to `events`; never raises for host problems."""
    return _Run(playbook, inventory, options, events, run_id, modules, stop, transport_factory).run()
