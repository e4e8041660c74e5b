"""Shard selection: every host in exactly one shard, hosts added move no other host, a shard
added moves only the hosts it wins, and the engines' variables read as the shard index."""
from __future__ import annotations

import pytest

from fleetops.engine import shards
from fleetops.errors import BadInput

HOSTS = [f"web{i:04d}.example.net" for i in range(2000)]


def _assignment(hosts, n):
    return {h: shards.owner(h, n) for h in hosts}


def test_every_host_in_exactly_one_shard_in_inventory_order():
    parts = [shards.select(HOSTS, shards.Shard(k, 4)) for k in range(4)]
    assert sorted(h for p in parts for h in p) == sorted(HOSTS)
    assert all(p == [h for h in HOSTS if h in set(p)] for p in parts)
    assert all(350 < len(p) < 650 for p in parts), [len(p) for p in parts]   # 500 each on average


def test_adding_hosts_moves_none_and_adding_a_shard_moves_only_what_it_wins():
    before = _assignment(HOSTS, 4)
    grown = _assignment(HOSTS + [f"new{i}" for i in range(500)], 4)
    assert all(grown[h] == before[h] for h in HOSTS)
    five = _assignment(HOSTS, 5)
    moved = [h for h in HOSTS if five[h] != before[h]]
    assert all(five[h] == 4 for h in moved)                      # only to the new shard
    assert 0.12 < len(moved) / len(HOSTS) < 0.28                 # about 1/5


def test_the_hash_is_fixed_across_interpreters():
    # SHA-256 of "index\0host": the same owner on every controller (Python's hash() is salted per process)
    assert [shards.owner(h, 4) for h in ("a", "b", "web01", "db-7.internal")] == \
        [shards.owner(h, 4) for h in ("a", "b", "web01", "db-7.internal")]
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "from fleetops.engine.shards import owner;"
                          "print([owner(h, 7) for h in ('a', 'b', 'web01', 'db-7.internal')])"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == str([shards.owner(h, 7) for h in ("a", "b", "web01", "db-7.internal")])


def test_an_empty_shard_is_no_error():
    other = (shards.owner("only", 3) + 1) % 3
    assert shards.select(["only"], shards.Shard(other, 3)) == []


@pytest.mark.parametrize("text", ["3", "4/4", "-1/4", "a/b", "1/0", ""])
def test_bad_shard_text_is_one_line(text):
    with pytest.raises(BadInput) as exc:
        shards.parse(text)
    assert "\n" not in str(exc.value) and str(exc.value).startswith("--shard: ")


def test_index_from_the_engines_variables():
    assert shards.from_env(None, 4, {"JOB_COMPLETION_INDEX": "2"}) == shards.Shard(2, 4)
    assert shards.from_env(None, 4, {"NOMAD_ALLOC_INDEX": "3"}) == shards.Shard(3, 4)
    assert shards.from_env("CI_NODE_INDEX", 4, {"CI_NODE_INDEX": "0", "JOB_COMPLETION_INDEX": "2"}) == \
        shards.Shard(0, 4)
    for env, count, where in (({}, 4, "--shard-from-env"), ({"JOB_COMPLETION_INDEX": "4"}, 4, "JOB_COMPLETION_INDEX"),
                              ({"NOMAD_ALLOC_INDEX": "x"}, 4, "NOMAD_ALLOC_INDEX"),
                              ({"JOB_COMPLETION_INDEX": "1"}, None, "--shard-from-env")):
        with pytest.raises(BadInput) as exc:
            shards.from_env(None, count, env)
        assert str(exc.value).startswith(where + ": ")
