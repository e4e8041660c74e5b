"""What a run gives the code that runs its tasks, named once: the task loop (tasklist.py), the
task runner (taskrun.py) and dynamic includes (includerun.py) see a `RunContext`, never the
executor's run itself. A host's state (`HostState`), where a task sits (`Frame`) and the run's
options (`RunOptions`) are the data they pass around."""
from __future__ import annotations

import concurrent.futures
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fleetops.engine.batches import BatchGate
    from fleetops.engine.connection.session import HostSession
    from fleetops.engine.connection.transport import Transport
    from fleetops.engine.events import EventSink
    from fleetops.engine.inventory.model import Inventory
    from fleetops.engine.module import Module, Result
    from fleetops.engine.playcontext import PlayContext
    from fleetops.engine.playbook.model import Task
    from fleetops.engine.templating import Templar


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
    batch_gate: BatchGate | None = None     # the hook around batches; None: batches.LocalBatches()


@dataclass
class HostState:
    """What the run knows about one host; written only by the thread running its task."""

    name: str
    transport: HostSession | None = None   # its connection and run lock, opened on first use
    local: Transport | None = None  # LocalTransport for delegate_to: localhost
    facts: dict = field(default_factory=dict)
    persistent: dict = field(default_factory=dict)   # registered results and set_fact, for the run
    secrets: set = field(default_factory=set)        # values templated from secrets on this host so far
    unreachable: bool = False
    failed: bool = False            # failed in an earlier batch/play: excluded from later plays
    notified: set = field(default_factory=set)
    busy: str | None = None         # another run holds the host: why, for every later task


@dataclass
class Frame:
    """Where a task sits: the playbook model already resolved inherited keywords
    (when, vars, become, check_mode, ...), so only rescue scope is left to track."""

    rescuable: bool = False         # a failure here is handled by an enclosing block's rescue


class RunContext(Protocol):
    """Exactly what running tasks needs from a run (executor._Run provides it)."""

    inventory: Inventory
    options: RunOptions
    events: EventSink
    templar: Templar
    modules: dict[str, type[Module]]
    run_id: str
    playbook_dir: str
    stop: threading.Event
    lock: threading.RLock
    stats: dict[str, dict]
    pool: concurrent.futures.ThreadPoolExecutor

    def stopped(self) -> bool: ...
    def state(self, host: str) -> HostState: ...
    def transport_for(self, host: str, delegated: bool, remote_user: str | None = None,
                      connection: str | None = None) -> Transport: ...
    def inventory_become(self, host: str) -> bool: ...
    def inventory_become_user(self, host: str) -> str | None: ...
    def task_vars(self, pctx: PlayContext, host: str, task: Any, frame: Frame, check: bool) -> dict: ...
    def secret_values(self, variables: dict) -> set: ...
    def live_hosts(self, pctx: PlayContext, live: list | None = None) -> tuple: ...
    def groups_changed(self, host: str) -> None: ...
    def payload(self, transport: Transport, name: str, args: dict, python: str | None = None,
                become_user: str | None = None, timeout: float | None = None,
                low_priority: bool = True, environment: dict | None = None) -> Result: ...
    def host_dir(self, host: str) -> str: ...


class TaskList(Protocol):
    """What a dynamic include needs of the task loop that reached it (tasklist.TaskLoop)."""

    run: RunContext

    def run_list(self, pctx: PlayContext, tasks: Any, hosts: list, frame: Frame) -> list: ...
    def finish(self, pctx: PlayContext, host: str, task: Task, frame: Frame, res: dict, started: float,
               ended: float, secret_values: set) -> str: ...
