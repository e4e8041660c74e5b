"""One play while it runs: its hosts, the current batch, and what stops it early.

Shared by the play loop, the task loop and the variables, which each read or set a part of it.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fleetops.engine.playbook.model import Play


@dataclass
class PlayContext:
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
    included: dict = field(default_factory=dict)   # a dynamic include's tasks read when reached, by name

    def number_tasks(self) -> None:
        """Give every task and handler (blocks walked) its index in events: facts first, when gathered."""
        counter = 0
        if self.play.gather_facts:
            self.facts_index = counter
            counter += 1
        for t in list(walk(self.play.tasks)) + list(walk(self.play.handlers)):
            self.index_of[id(t)] = counter
            counter += 1


def walk(tasks: Any) -> Iterator[Any]:
    """Every task of a list, blocks' block/rescue/always included, in definition order."""
    for t in tasks or ():
        yield t
        if t.block is not None:
            yield from walk(t.block)
            yield from walk(t.rescue)
            yield from walk(t.always)


def task_label(task: Any) -> str:
    """How a task is named in events: its name (else its module), `role : name` inside a role."""
    name = task.name or task.module or task.action      # an unnamed include: its key as written
    return f"{task.role} : {name}" if task.role else name
