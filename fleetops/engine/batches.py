"""A play's hosts in order and in `serial` batches, and when a batch's failures stop the play.

Pure functions, so the batching and the max_fail_percentage verdict are tested without a host.
"""
from __future__ import annotations

import random
from typing import Any, Callable, Protocol


def batch_size(entry: Any, total: int) -> int:
    """One `serial` entry -> batch size: ints as given, "N%" of the play's hosts rounded down, at least 1."""
    if isinstance(entry, str) and entry.strip().endswith("%"):
        size = int(total * float(entry.strip()[:-1]) / 100)
    else:
        size = int(entry)
        if size <= 0:
            size = total
    return max(1, size)


def split_batches(hosts: list, serial: Any) -> list[list]:
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


def order_hosts(hosts: list, order: str) -> list:
    """A play's `order`: inventory (as selected), reverse_inventory, sorted, reverse_sorted, shuffle."""
    if order == "reverse_inventory":
        return hosts[::-1]
    if order in ("sorted", "reverse_sorted"):
        return sorted(hosts, reverse=order == "reverse_sorted")
    if order == "shuffle":
        return random.sample(hosts, len(hosts))
    return list(hosts)


def batch_abort(batch: list, bad: list, bindex: int, max_fail_percentage: float | None) -> str | None:
    """Why the play stops after this batch (`bad`: its failed or unreachable hosts), or None.

    Over max_fail_percentage stops it, and so does a batch where every host failed, as in Ansible."""
    mfp = max_fail_percentage
    if mfp is not None and bad and 100.0 * len(bad) / len(batch) > mfp:
        pct = 100.0 * len(bad) / len(batch)
        return (f"max_fail_percentage exceeded: {len(bad)} of {len(batch)} hosts "
                f"of batch {bindex + 1} failed ({pct:.0f}% > {mfp:g}%)")
    if bad and len(bad) == len(batch):
        return f"all hosts of batch {bindex + 1} failed"
    return None


class BatchGate(Protocol):
    """The executor's hook around a play's batches (LocalBatches; engine/campaign.py's Campaign)."""

    def plan(self, play_index: int, play, hosts: list, stopped: Callable[[], bool]) -> list[list]: ...
    def before(self, play_index: int, bindex: int) -> str | None: ...
    def after(self, play_index: int, bindex: int, batch: list, failed: list, unreachable: list) -> str | None: ...
    def finish(self, play_index: int, reason: str | None) -> None: ...


class LocalBatches:
    """The batch hook of a controller on its own: the play's hosts (those `shard` owns, with
    one) in `serial` batches, and Ansible's per-batch verdict. engine/campaign.py's Campaign
    offers the same four calls for a rollout spread over several controllers."""

    def __init__(self, shard=None):
        self.shard = shard
        self._mfp: dict = {}

    def plan(self, play_index: int, play, hosts: list, stopped) -> list[list]:
        """The batches this controller runs; an empty list when it runs nothing of the play."""
        from fleetops.engine.shards import select

        self._mfp[play_index] = play.max_fail_percentage
        return split_batches(select(hosts, self.shard), play.serial)

    def before(self, play_index: int, bindex: int) -> str | None:
        """Why the play stops before batch `bindex` starts, or None."""
        return None

    def after(self, play_index: int, bindex: int, batch: list, failed: list, unreachable: list) -> str | None:
        """Why the play stops after batch `bindex`, or None."""
        return batch_abort(batch, failed + unreachable, bindex, self._mfp.get(play_index))

    def finish(self, play_index: int, reason: str | None) -> None:
        """The play ended here (its last batch, a stop, or end_play)."""
