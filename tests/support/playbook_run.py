"""Helpers for the executor tests: a recording EventSink and a one-call playbook runner.

Unit tests run real playbooks (real loader, templar, payload runner) on the
LocalTransport, with inventory hosts that all map to this machine and work in
per-host folders under tmp_path; lab tests use the real sshd hosts.
"""
from __future__ import annotations

import textwrap
import threading

import pytest

from fleetops.engine.events import EventSink
from fleetops.engine.executor import RunOptions, run_playbook
from fleetops.engine.inventory import load_inventory
from fleetops.engine.connection.local import LocalTransport
from fleetops.engine.playbook import load_playbook
from fleetops.extensions import registry


class Recorder(EventSink):
    """Keeps every event as (name, args) in order; thread-safe. `on` hooks let a test act mid-run."""

    def __init__(self):
        self.events: list = []
        self.lock = threading.Lock()
        self.hooks: dict = {}

    def _add(self, name, *args):
        with self.lock:
            self.events.append((name,) + args)
        hook = self.hooks.get(name)
        if hook:
            hook(*args)

    def run_start(self, *a): self._add("run_start", *a)
    def play_start(self, *a): self._add("play_start", *a)
    def batch_start(self, *a): self._add("batch_start", *a)
    def task_start(self, *a): self._add("task_start", *a)
    def host_task_start(self, *a): self._add("host_task_start", *a)
    def host_result(self, *a): self._add("host_result", *a)
    def host_facts(self, *a): self._add("host_facts", *a)
    def play_end(self, *a): self._add("play_end", *a)
    def run_end(self, *a): self._add("run_end", *a)

    def of(self, name):
        return [e[1:] for e in self.events if e[0] == name]

    def results(self, task_name=None, host=None):
        """host -> result for one task (or [(host, task, result)] without a task name)."""
        rows = [(e[0], e[3], e[5]) for e in self.of("host_result")]
        if task_name is None:
            return [r for r in rows if host is None or r[0] == host]
        return {h: r for h, t, r in rows if t == task_name}

    def failures(self):
        """[(host, task, msg)] of failed results: what an assertion message should show."""
        return [(h, t, r.get("msg")) for h, t, r in self.results() if r.get("failed") or r.get("unreachable")]

    def task_names(self):
        return [e[2] for e in self.of("task_start")]


LOCAL_INVENTORY = """
all:
  children:
    web:
      hosts:
        h1: {}
        h2: {}
    db:
      hosts:
        h3: {}
  vars:
    inv_var: from_inventory
"""


def run_yaml(tmp_path, playbook: str, inventory: str = LOCAL_INVENTORY, stop=None, transport_factory=None,
             files: dict | None = None, hooks: dict | None = None, **opts):
    """Write the playbook (and extra files), load it for real, run it; returns (outcome, recorder)."""
    pb_dir = tmp_path / "pb"
    pb_dir.mkdir(exist_ok=True)
    for rel, text in (files or {}).items():
        p = pb_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    pb = pb_dir / "site.yml"
    pb.write_text(textwrap.dedent(playbook).replace("@TMP@", str(tmp_path)))
    inv_path = tmp_path / "inventory.yml"
    if not inv_path.exists() or inventory is not LOCAL_INVENTORY:
        inv_path.write_text(textwrap.dedent(inventory))
    inventory_obj = load_inventory(str(inv_path))
    book = load_playbook(str(pb), registry().modules)
    opts.setdefault("results_dir", str(tmp_path / "runs"))
    rec = Recorder()
    rec.hooks.update(hooks or {})
    outcome = run_playbook(book, inventory_obj, RunOptions(**opts), rec, "run-test", registry().modules,
                           stop=stop, transport_factory=transport_factory or LocalTransport)
    return outcome, rec


def messages(rec: Recorder, keep=lambda task: True) -> dict:
    """{task name: {host: msg}} of the results that have a msg, as oracle.task_messages gives
    ansible-playbook's (a role's task named without its `role : ` prefix)."""
    out: dict = {}
    for h, t, r in rec.results():
        if "msg" in r and keep(t):
            out.setdefault(t.split(" : ")[-1], {})[h] = r["msg"]
    return out


@pytest.fixture
def run(tmp_path):
    def _run(playbook, **kw):
        return run_yaml(tmp_path, playbook, **kw)
    return _run
