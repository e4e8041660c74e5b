"""Which controller runs which host: `--shard K/N` by rendezvous hashing of inventory_hostname.

Each host goes to the shard whose hash of (shard, host) is highest. The choice of one host
depends only on its own name and N: adding or removing hosts moves none of the others, and
going from N to N+1 shards moves only the hosts the new shard wins (about 1/(N+1) of them).
The hash is SHA-256, so every controller, whatever its Python or platform, agrees.

K/N also comes from the environment the engines set: Kubernetes Indexed Jobs'
JOB_COMPLETION_INDEX, Nomad's NOMAD_ALLOC_INDEX, or any named variable (a CI matrix's).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from fleetops.errors import BadInput

ENGINE_VARIABLES = ("JOB_COMPLETION_INDEX", "NOMAD_ALLOC_INDEX")


@dataclass(frozen=True)
class Shard:
    index: int      # 0-based, as the engines number their workers
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def _score(index: int, host: str) -> bytes:
    return hashlib.sha256(f"{index}\0{host}".encode()).digest()


def owner(host: str, count: int) -> int:
    """The shard (0..count-1) that runs `host`."""
    return max(range(count), key=lambda i: _score(i, host))


def select(hosts: list, shard: Shard | None) -> list:
    """The hosts of `hosts` (order kept) that `shard` runs; all of them without a shard."""
    if shard is None or shard.count == 1:
        return list(hosts)
    return [h for h in hosts if owner(h, shard.count) == shard.index]


def _check(index: int, count: int, where: str) -> Shard:
    if count < 1:
        raise BadInput(f"a shard count must be 1 or more, not {count}", where=where)
    if not 0 <= index < count:
        raise BadInput(f"shard index {index} is outside 0..{count - 1} (shards are numbered from 0)", where=where)
    return Shard(index, count)


def parse(text: str) -> Shard:
    """'K/N' -> Shard; anything else is a one-line BadInput naming the value."""
    k, sep, n = (text or "").partition("/")
    if not sep or not k.strip().isdigit() or not n.strip().isdigit():
        raise BadInput(f"--shard wants K/N (index from 0, then the shard count), not {text!r}", where="--shard")
    return _check(int(k), int(n), "--shard")


def from_env(variable: str | None, count: int | None, environ=None) -> Shard:
    """The shard an engine gave this process: `variable` (a name; None: the first engine variable
    set) holds the index, `count` the number of shards (the engines set no count of their own)."""
    env = os.environ if environ is None else environ
    if count is None:
        raise BadInput("--shard-from-env needs --shard-count N (the number of shards)", where="--shard-from-env")
    names = (variable,) if variable else ENGINE_VARIABLES
    for name in names:
        value = env.get(name)
        if value is None:
            continue
        if not value.strip().isdigit():
            raise BadInput(f"{name}={value!r} is not a shard index (a whole number from 0)", where=name)
        return _check(int(value), count, name)
    raise BadInput(f"no shard index in the environment: {' or '.join(names)} is not set", where="--shard-from-env")
