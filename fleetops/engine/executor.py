"""The executor: runs a playbook's plays over the fleet with Ansible's linear strategy.

Per play: hosts from the pattern (and --limit), split into `serial` batches;
within a batch each task runs on every live host at once (`forks` worker
threads) and the next task starts when all are done, so an operator can reason
about a run exactly as with Ansible. Blocks, handlers, max_fail_percentage and
any_errors_fatal follow Ansible's semantics. Output is events only
(engine/events.py): the display, --json and the results store listen.
The per-host task logic (when/loop/until/...) lives in engine/taskrun.py.
"""
from __future__ import annotations

import collections.abc
import concurrent.futures
import copy
import os
import threading
import time
import uuid
from dataclasses import dataclass, field

from fleetops.engine import recap
from fleetops.engine import results_backend as _results_backend
from fleetops.engine import secrets as _secrets
from fleetops.engine.events import EventSink
from fleetops.engine.inventory import short_name
from fleetops.engine.connection.local import LocalTransport
from fleetops.engine.payload import run_payload
from fleetops.engine.connection import runlock as _runlock
from fleetops.engine.connection.runlock import HostBusy
from fleetops.engine.connection.transport import ConnParams, Transport
from fleetops.engine.module import Result
from fleetops.engine.playbook.model import Play
from fleetops.engine.taskrun import Frame, GatherFacts, HostState, TaskRunner, facts_task, record
from fleetops.engine.templating import Templar, TemplateError
from fleetops.engine.varsfile import load_vars_file
from fleetops.engine.variables import layered
from fleetops.errors import (EXIT_HOST_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_UNREACHABLE, BadInput,
                             Unreachable)


# the ansible-core release whose playbook semantics fleetops follows (and is tested against):
# what `ansible_version` gives a playbook that checks it (`ansible_version.full is version(...)`)
ANSIBLE_VERSION = {"full": "2.19.0", "major": 2, "minor": 19, "revision": 0, "string": "2.19.0 (fleetops)"}


@dataclass
class RunOptions:
    limit: str | None = None
    tags: set = field(default_factory=set)
    skip_tags: set = field(default_factory=set)
    extra_vars: dict = field(default_factory=dict)
    forks: int = 20
    check: bool = False
    diff: bool = False
    accept_new_host_keys: bool = False
    results_dir: str = "fleetops-runs"      # runs.db and fetched files; with results_db, the files only
    results_db: str | None = None           # a PostgreSQL URL holding the runs instead of runs.db
    known_hosts: str | None = None


@dataclass
class RunOutcome:
    run_id: str
    status: str          # ok | failed | unreachable | interrupted
    exit_code: int
    stats: dict          # host -> {ok, changed, unreachable, failed, skipped, rescued, ignored}


# ---------------------------------------------------------------- pure helpers

def batch_size(entry, total: int) -> int:
    """One `serial` entry -> batch size: ints as given, "N%" of the play's hosts rounded down, at least 1."""
    if isinstance(entry, str) and entry.strip().endswith("%"):
        size = int(total * float(entry.strip()[:-1]) / 100)
    else:
        size = int(entry)
        if size <= 0:
            size = total
    return max(1, size)


def split_batches(hosts: list, serial) -> list[list]:
    """Ansible's serial batching: the last entry repeats until the hosts run out."""
    hosts = list(hosts)
    if not hosts:
        return []
    if serial is None or serial == [] or serial == "":
        return [hosts]
    entries = serial if isinstance(serial, (list, tuple)) else [serial]
    sizes = [batch_size(e, len(hosts)) for e in entries]
    out, i, k = [], 0, 0
    while i < len(hosts):
        size = sizes[min(k, len(sizes) - 1)]
        out.append(hosts[i:i + size])
        i += size
        k += 1
    return out


def task_label(task) -> str:
    """How a task is named in events: its name (else its module), `role : name` inside a role."""
    name = task.name or task.module
    return f"{task.role} : {name}" if task.role else name


def order_hosts(hosts: list, order: str) -> list:
    """A play's `order`: inventory (as selected), reverse_inventory, sorted, reverse_sorted, shuffle."""
    if order == "reverse_inventory":
        return hosts[::-1]
    if order in ("sorted", "reverse_sorted"):
        return sorted(hosts, reverse=order == "reverse_sorted")
    if order == "shuffle":
        import random
        return random.sample(hosts, len(hosts))
    return list(hosts)


def tags_match(task_tags, only, skip) -> bool:
    """Ansible's tag selection: `always` runs unless skipped by name, `never` only when asked for."""
    tags = set(task_tags or ())
    only = set(only or ()) or {"all"}
    skip = set(skip or ())
    if "always" in tags and "always" not in skip:
        run = True
    elif "all" in only and "never" not in tags:
        run = True
    elif tags & only:
        run = True
    elif "tagged" in only and tags and "never" not in tags:
        run = True
    elif "untagged" in only and not tags:
        run = True
    else:
        run = False
    if run and skip:
        if "all" in skip:
            if "always" not in tags or "always" in skip:
                run = False
        elif tags & skip:
            run = False
        elif "tagged" in skip and tags:
            run = False
        elif "untagged" in skip and not tags:
            run = False
    return run


def _walk(tasks):
    for t in tasks or ():
        yield t
        if t.block is not None:
            yield from _walk(t.block)
            yield from _walk(t.rescue)
            yield from _walk(t.always)


def _scrub_value(value, values):
    if isinstance(value, str):
        return _secrets.scrub(value, values)
    if isinstance(value, dict):
        return {k: _scrub_value(v, values) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub_value(v, values) for v in value]
    return value


class HostVars(collections.abc.Mapping):
    """`hostvars`: other hosts' variables, computed only when a template looks one up."""

    def __init__(self, run: "_Run", pctx):
        self._run = run
        self._pctx = pctx

    def __getitem__(self, host):
        if host not in self._run.inventory.hosts:
            raise KeyError(host)
        return self._run.host_view(self._pctx, host)

    def __iter__(self):
        return iter(self._run.inventory.hosts)

    def __len__(self):
        return len(self._run.inventory.hosts)


@dataclass
class _Play:
    play: Play
    index: int
    hosts: list
    batch: list = field(default_factory=list)
    index_of: dict = field(default_factory=dict)
    facts_index: int = 0
    vars_files: dict = field(default_factory=dict)
    abort: str | None = None
    active: tuple | None = None     # (play hosts still live, those of the batch) as at the task's start
    ended: set = field(default_factory=set)        # hosts a meta end_host/end_batch/end_play stopped
    end_play: bool = False


# ---------------------------------------------------------------- the run

class _Run:
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
        self.transport_factory = transport_factory
        self.templar = Templar()
        self.modules = {**modules, GatherFacts.name: GatherFacts}
        self.playbook_dir = playbook.dir
        self.omit = f"__omit_place_holder__{uuid.uuid4().hex}"
        self.lock = threading.RLock()
        self.hosts: dict[str, HostState] = {}
        self.stats: dict[str, dict] = {}
        self.interrupted = False
        self._inv_vars: dict = {}
        self._params: dict = {}
        self._groups: dict | None = None
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, int(options.forks or 1)),
                                                          thread_name_prefix="fleetops-fork")

    # -- entry
    def run(self) -> RunOutcome:
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
                if self._stopped():
                    break
                if self._run_play(index, play):
                    break
        finally:
            self.pool.shutdown(wait=True)
            self._close_all()
        if self.interrupted:
            status, code = "interrupted", EXIT_INTERRUPTED
        elif any(st.failed for st in self.hosts.values()):
            status, code = "failed", EXIT_HOST_FAILED
        elif any(st.unreachable for st in self.hosts.values()):
            status, code = "unreachable", EXIT_UNREACHABLE
        else:
            status, code = "ok", EXIT_OK
        stats = {h: dict(s) for h, s in self.stats.items()}
        self.events.run_end(status, stats, code)
        return RunOutcome(run_id=self.run_id, status=status, exit_code=code, stats=stats)

    def _stopped(self) -> bool:
        if self.stop.is_set():
            self.interrupted = True
            return True
        return False

    def _close_all(self) -> None:
        for st in self.hosts.values():
            self._close_host(st)
            if st.local is not None:
                try:
                    st.local.close()
                except Exception:  # noqa: BLE001 - closing must not hide the run's result
                    pass

    @staticmethod
    def _close_host(st: HostState) -> None:
        """Release the host's run lock and close its connection (a later task may open another)."""
        if st.run_lock is not None:
            st.run_lock.close()
            st.run_lock = None
        if st.transport is not None:
            try:
                st.transport.close()
            except Exception:  # noqa: BLE001 - closing must not hide the run's result
                pass
        st.transport, st.connected = None, False

    # -- plays and batches
    def state(self, host: str) -> HostState:
        st = self.hosts.get(host)
        if st is None:
            with self.lock:
                st = self.hosts.setdefault(host, HostState(name=host))
        return st

    def _play_hosts(self, play) -> list:
        hosts = self.inventory.select(play.hosts)
        if self.options.limit:
            allowed = set(self.inventory.select(self.options.limit))
            hosts = [h for h in hosts if h in allowed]
        hosts = [h for h in hosts if not (self.state(h).failed or self.state(h).unreachable)]
        return order_hosts(hosts, play.order)

    def _run_play(self, index: int, play) -> bool:
        """Run one play; True when the whole run must stop (abort or interrupt)."""
        hosts = self._play_hosts(play)
        self.events.play_start(index, play.name or play.hosts, list(hosts))
        if not hosts:
            self.events.play_end(index, "no hosts matched")
            return False
        for h in hosts:
            self.stats.setdefault(h, recap.zero())
        pctx = _Play(play=play, index=index, hosts=hosts)
        counter = 0
        if play.gather_facts:
            pctx.facts_index = counter
            counter += 1
        for t in list(_walk(play.tasks)) + list(_walk(play.handlers)):
            pctx.index_of[id(t)] = counter
            counter += 1
        try:
            pctx.vars_files = self._load_vars_files(play)
        except (BadInput, OSError) as e:
            for h in hosts:
                self.state(h).failed = True
                self.stats[h]["failed"] += 1
            self.events.play_end(index, f"vars_files: {e}")
            return True

        reason = None
        if play.limit_templates and not play.limits_resolved:  # never cut batches from an unrendered template
            raise BadInput("templated serial/max_fail_percentage was not resolved (validate() the playbook first)",
                           where=play.where)
        batches = split_batches(hosts, play.serial)
        for bindex, batch in enumerate(batches):
            if self._stopped():
                reason = "interrupted"
                break
            pctx.batch, pctx.active = list(batch), None
            self.events.batch_start(index, bindex, list(batch))
            live = list(batch)
            if play.gather_facts:
                live = self._gather(pctx, live)
            live = self._run_list(pctx, play.tasks, live, Frame())
            if not pctx.abort and not self.stop.is_set():
                live = self._run_handlers(pctx, live)
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
            if self._stopped():
                reason = "interrupted"
                break
            bad = [h for h in batch if self.state(h).failed or self.state(h).unreachable]
            mfp = play.max_fail_percentage
            if mfp is not None and bad and 100.0 * len(bad) / len(batch) > mfp:
                pct = 100.0 * len(bad) / len(batch)
                reason = pctx.abort = (f"max_fail_percentage exceeded: {len(bad)} of {len(batch)} hosts "
                                       f"of batch {bindex + 1} failed ({pct:.0f}% > {mfp:g}%)")
                break
            if bad and len(bad) == len(batch):
                reason = pctx.abort = f"all hosts of batch {bindex + 1} failed"
                break
        self.events.play_end(index, reason)
        return bool(pctx.abort) or self.interrupted

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

    # -- task lists and blocks
    def _run_list(self, pctx: _Play, tasks, hosts: list, frame: Frame) -> list:
        """Run tasks in order over `hosts`; returns the hosts still running (not failed/unreachable)."""
        live = list(hosts)
        for task in tasks or ():
            if not live or pctx.abort or self._stopped():
                break
            if task.block is not None:
                live = self._run_block(pctx, task, live, frame)
                continue
            if task.implicit:
                live = self._run_handlers(pctx, live)       # the flush between play sections
                continue
            if not tags_match(task.tags, self.options.tags, self.options.skip_tags):
                continue
            out = self._run_task(pctx, task, live, frame)
            live = [h for h in live if out.get(h) not in ("failed", "rescued", "unreachable")]
            if task.module == "meta":
                live = self._meta(pctx, task, live, out)
        return live

    def _meta(self, pctx: _Play, task, live: list, out: dict) -> list:
        """Carry out a meta task for the hosts it ran on (not skipped by its `when`)."""
        action = str((task.args or {}).get("cmd"))
        acted = [h for h in live if out.get(h) == "ok"]
        if not acted:
            return live
        if action == "flush_handlers":
            return self._run_handlers(pctx, live)
        if action == "end_host":
            pctx.ended |= set(acted)
            return [h for h in live if h not in acted]
        if action in ("end_batch", "end_play"):
            pctx.ended |= set(pctx.batch)
            pctx.end_play = pctx.end_play or action == "end_play"
            return []
        return live

    def _run_block(self, pctx: _Play, block, hosts: list, frame: Frame) -> list:
        """block/rescue/always: rescue takes the hosts that failed in block; always runs for all."""
        ok = self._run_list(pctx, block.block, hosts, Frame(rescuable=frame.rescuable or bool(block.rescue)))
        if pctx.abort or self.stop.is_set():
            return ok
        failed = [h for h in hosts if h not in ok and not self.state(h).unreachable]
        keep = set(ok)
        if block.rescue and failed:
            keep |= set(self._run_list(pctx, block.rescue, failed, Frame(rescuable=frame.rescuable)))
        if block.always:
            targets = [h for h in hosts if not self.state(h).unreachable]
            keep &= set(self._run_list(pctx, block.always, targets, Frame(rescuable=frame.rescuable)))
        return [h for h in hosts if h in keep]

    def _run_handlers(self, pctx: _Play, live: list) -> list:
        """Notified handlers, in definition order, once per host; `listen` topics too."""
        for handler in pctx.play.handlers or ():
            if not live or pctx.abort or self._stopped():
                break
            names = {n for n in [handler.name] + list(handler.listen or []) if n}
            targets = [h for h in live if self.state(h).notified & names]
            if not targets:
                continue
            out = self._run_task(pctx, handler, targets, Frame())
            for h in targets:
                self.state(h).notified -= names
            live = [h for h in live if out.get(h) not in ("failed", "rescued", "unreachable")]
        return live

    # -- one task over hosts
    def _run_task(self, pctx: _Play, task, live: list, frame: Frame) -> dict:
        """Run `task` on every host of `live` in parallel; host -> outcome."""
        tindex = pctx.index_of.get(id(task), -1)
        name = task_label(task)
        self.events.task_start(pctx.index, tindex, name, task.module, list(live))
        pctx.active = self._live_hosts(pctx, live)
        if task.run_once:
            futures = [self.pool.submit(self._host_task_once, pctx, task, list(live), frame)]
        else:
            futures = [self.pool.submit(self._host_task, pctx, task, h, frame) for h in live]
        outcomes: dict = {}
        for fut in futures:
            outcomes.update(fut.result())
        if pctx.play.any_errors_fatal and not pctx.abort:
            bad = [h for h in live if outcomes.get(h) in ("failed", "unreachable")]
            if bad:
                pctx.abort = f"any_errors_fatal: task '{name}' failed on {', '.join(bad)}"
        return outcomes

    def _host_task(self, pctx: _Play, task, host: str, frame: Frame) -> dict:
        if self.stop.is_set():
            return {host: None}      # interrupted before this host started: nothing ran
        name = task_label(task)
        self.events.host_task_start(host, name)
        started = time.time()
        res, secret_values = self._compute(pctx, task, host, frame)
        ended = time.time()
        return {host: self._finish(pctx, host, task, frame, res, started, ended, secret_values)}

    def _host_task_once(self, pctx: _Play, task, hosts: list, frame: Frame) -> dict:
        """run_once: the first reachable host runs it; its result applies to every host."""
        out: dict = {}
        for i, host in enumerate(hosts):
            if self.stop.is_set():
                return out
            self.events.host_task_start(host, task_label(task))
            started = time.time()
            res, secret_values = self._compute(pctx, task, host, frame)
            ended = time.time()
            if res.get("unreachable") and i + 1 < len(hosts):
                out[host] = self._finish(pctx, host, task, frame, res, started, ended, secret_values)
                continue
            out[host] = self._finish(pctx, host, task, frame, res, started, ended, secret_values)
            for other in hosts[i + 1:]:
                copied = copy.deepcopy(res)
                copied["run_once_host"] = host
                out[other] = self._finish(pctx, other, task, frame, copied, started, ended, secret_values)
            return out
        return out

    def _compute(self, pctx: _Play, task, host: str, frame: Frame):
        runner = TaskRunner(self, pctx, host, task, frame)
        return runner.execute(), runner.secrets

    def _finish(self, pctx: _Play, host: str, task, frame: Frame, res: dict, started: float,
                ended: float, secret_values) -> str:
        """The host's state (taskrun.record), its counters, the events. Returns the host's outcome."""
        st = self.state(host)
        with self.lock:
            outcome = record(self, host, task, frame, res, started, ended, secret_values)
            recap.count(self.stats.setdefault(host, recap.zero()), res)
        if outcome == "unreachable" and st.transport is not None:
            try:
                st.transport.close()
            except Exception:  # noqa: BLE001
                pass
        if task.module == GatherFacts.name and outcome == "ok":
            self.events.host_facts(host, res["ansible_facts"])
        shown = _scrub_value(res, secret_values) if secret_values else res
        self.events.host_result(host, pctx.index, pctx.index_of.get(id(task), pctx.facts_index),
                                task_label(task), task.module, shown, started, ended)
        return outcome

    # -- facts
    def _gather(self, pctx: _Play, live: list) -> list:
        task = facts_task(pctx.play)
        self.events.task_start(pctx.index, pctx.facts_index, task_label(task), GatherFacts.name, list(live))
        pctx.active = self._live_hosts(pctx, live)
        futures = [self.pool.submit(self._host_task, pctx, task, h, Frame()) for h in live]
        outcomes: dict = {}
        for fut in futures:
            outcomes.update(fut.result())
        if pctx.play.any_errors_fatal:
            bad = [h for h in live if outcomes.get(h) in ("failed", "unreachable")]
            if bad:
                pctx.abort = f"any_errors_fatal: gathering facts failed on {', '.join(bad)}"
        return [h for h in live if outcomes.get(h) not in ("failed", "unreachable")]

    # -- variables
    def inventory_vars(self, host: str) -> dict:
        v = self._inv_vars.get(host)
        if v is None:
            v = self.inventory.get_vars(host)
            with self.lock:
                self._inv_vars[host] = v
        return v

    def groups_changed(self, host: str) -> None:
        """A task added `host` to a group: `groups` and the host's group_names are recomputed."""
        self._groups = None
        self._inv_vars.pop(host, None)

    def groups(self) -> dict:
        if self._groups is None:
            self._groups = self.inventory.groups_map()
        return self._groups

    def _live_hosts(self, pctx: _Play, live=None) -> tuple:
        """(play hosts not failed or unreachable, those of the current batch still running: `live`).

        Computed once per task, at its start, as Ansible's linear strategy does (computed per
        host, it made every task O(hosts²) at fleet size)."""
        batch = set(pctx.batch)
        running = set(pctx.batch if live is None else live)
        active = [h for h in pctx.hosts if not (self.state(h).failed or self.state(h).unreachable)
                  and (h in running or h not in batch)]
        alive = set(active)
        return active, [h for h in pctx.batch if h in running and h in alive]

    def _magic(self, pctx: _Play, host: str, check: bool) -> dict:
        active, active_batch = pctx.active or self._live_hosts(pctx)
        results_dir = os.path.abspath(self.options.results_dir)
        return {
            "inventory_hostname": host,
            "inventory_hostname_short": short_name(host),
            "groups": self.groups(),
            "hostvars": HostVars(self, pctx),
            "play_hosts": list(active),
            "ansible_play_hosts": list(active),
            "ansible_play_hosts_all": list(pctx.hosts),
            "ansible_play_batch": list(active_batch),
            "ansible_check_mode": bool(check),
            "ansible_diff_mode": bool(self.options.diff),
            "playbook_dir": self.playbook_dir,
            "fleetops_run_id": self.run_id,
            "fleetops_results_dir": results_dir,
            "omit": self.omit,
            "ansible_version": ANSIBLE_VERSION,
        }

    def task_vars(self, pctx: _Play, host: str, task, frame: Frame, check: bool) -> dict:
        """Every variable the task sees, in the order of engine/variables.py."""
        st = self.state(host)
        return layered(role_defaults=task.defaults, inventory=self.inventory_vars(host), facts=st.facts,
                       play_vars=pctx.play.vars, vars_files=pctx.vars_files, task_vars=task.vars,
                       persistent=st.persistent, extra_vars=self.options.extra_vars,
                       magic=self._magic(pctx, host, check))

    def host_view(self, pctx: _Play, host: str) -> dict:
        """What `hostvars[host]` shows: everything but task-level vars."""
        st = self.state(host)
        with self.lock:
            persistent = dict(st.persistent)
        return layered(inventory=self.inventory_vars(host), facts=st.facts, play_vars=pctx.play.vars,
                       vars_files=pctx.vars_files, persistent=persistent, extra_vars=self.options.extra_vars,
                       magic={"inventory_hostname": host, "inventory_hostname_short": short_name(host)})

    @staticmethod
    def secret_values(variables: dict) -> set:
        return _secrets.collect_secret_values(variables)

    # -- connections
    def params_for(self, host: str, remote_user: str | None = None) -> ConnParams:
        key = (host, remote_user)
        p = self._params.get(key)
        if p is None:
            extra = self.options.extra_vars or {}
            env = self.inventory.template_vars(host, extra)
            env["playbook_dir"] = self.playbook_dir
            p = self.inventory.connection_params(host, render=lambda value: self.templar.render(value, env),
                                                 extra_vars=extra, remote_user=remote_user)
            if self.options.known_hosts:
                p.known_hosts = self.options.known_hosts
            p.accept_new_host_keys = bool(p.accept_new_host_keys or self.options.accept_new_host_keys)
            with self.lock:
                self._params[key] = p
        return p

    def inventory_become_user(self, host: str) -> str | None:
        try:
            return self.params_for(host, None).become_user
        except (BadInput, TemplateError):
            return None

    def inventory_become(self, host: str) -> bool:
        """ansible_become on the host: as in Ansible, it applies to every task there."""
        try:
            return self.params_for(host).become
        except (BadInput, TemplateError):
            return False

    def transport_for(self, host: str, delegated: bool, remote_user: str | None = None):
        """The host's one transport (connected on first use); LocalTransport for delegate_to: localhost.

        A play or task whose remote_user gives another login user than the open connection's
        closes it (releasing the host's run lock) and logs in again as that user."""
        st = self.state(host)
        if delegated:
            if st.local is None:
                st.local = LocalTransport()
            return st.local
        try:
            params = self.params_for(host, remote_user)
        except (BadInput, TemplateError) as e:
            raise Unreachable(f"{host}: {e}") from None
        if st.transport is not None and st.transport.params.user != params.user:
            self._close_host(st)
        if st.transport is None:
            st.transport = LocalTransport(params) if params.connection == "local" else self.transport_factory(params)
        if st.busy:
            raise HostBusy(st.busy)
        if not st.connected:
            try:
                st.transport.connect()
            except Unreachable:
                raise
            except Exception as e:  # noqa: BLE001 - any connect failure means unreachable
                raise Unreachable(f"{host}: {type(e).__name__}: {e}") from None
            try:
                st.run_lock = _runlock.acquire(st.transport, self.run_id)
            except HostBusy as e:
                st.busy = str(e)          # refused for the whole run: never half of one
                try:
                    st.transport.close()
                except Exception:  # noqa: BLE001
                    pass
                raise
            st.connected = True
        return st.transport

    def payload(self, transport: Transport, name: str, args: dict, python=None, become_user=None, timeout=None,
                low_priority: bool = True) -> Result:
        return run_payload(transport, name, args, python=python, become_user=become_user, timeout=timeout,
                           low_priority=low_priority)

    def host_dir(self, host: str) -> str:
        return os.path.join(os.path.abspath(self.options.results_dir), self.run_id, host)


def run_playbook(playbook, inventory, options: RunOptions, events: EventSink, run_id: str,
                 modules: dict, stop: threading.Event | None = None, transport_factory=None) -> RunOutcome:
    """Run every play of `playbook` on `inventory` with `modules` (name -> Module class); events
    go to `events`; never raises for host problems."""
    return _Run(playbook, inventory, options, events, run_id, modules, stop, transport_factory).run()
