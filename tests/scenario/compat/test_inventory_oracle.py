"""Real inventories from public projects, read by fleetops and by ansible-core 2.19 (the oracle).

For every file of tests/data/ansible/inventories/INDEX.tsv: the hosts, each host's groups and
every variable (`ansible-inventory --list`) must equal fleetops' own reading (what `fleetops
hosts --json` prints before masking), and a set of host patterns per inventory must select the
same hosts in the same order as ansible-core's InventoryManager (the code behind `ansible
--list-hosts`), `inventory_hostname_short` included. A file ansible-core refuses must be refused.

ansible-core orders the hosts of grandchild groups by iterating a set of groups, so that part of
its order changes with Python's hash seed: in an inventory with such groups, and wherever the
oracle's answers under two seeds differ, the hosts are compared as a set (README: "Differences
from Ansible"); elsewhere the order must be the same.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from fleetops.engine.inventory import load_inventory
from fleetops.errors import BadInput
from tests.support import oracle
from tests.support.paths import DATA

CORPUS = os.path.join(DATA, "ansible", "inventories")
MAGIC = ("inventory_hostname", "inventory_hostname_short", "group_names")

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")


def corpus() -> list:
    rows = []
    with open(os.path.join(CORPUS, "INDEX.tsv"), encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#") or not line.strip():
                continue
            ident, name, repo, commit, path, licence = line.rstrip("\n").split("\t")[:6]
            rows.append(pytest.param(os.path.join(CORPUS, ident, name), id=ident))
    return rows


def test_corpus_is_attributed():
    """Every stored inventory names its source repository, commit, path and licence."""
    idents = {d for d in os.listdir(CORPUS) if os.path.isdir(os.path.join(CORPUS, d))}
    with open(os.path.join(CORPUS, "INDEX.tsv"), encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh if not line.startswith("#")]
    assert {r[0] for r in rows} == idents
    for r in rows:
        assert r[2] and len(r[3]) == 40 and r[4] and r[5] in ("GPL-3.0-or-later", "Apache-2.0", "MIT"), r
    assert len(rows) >= 100


@pytest.fixture(scope="module")
def listings():
    """`ansible-inventory --list` of every corpus file (the real command line), two at a time."""
    paths = [p.values[0] for p in corpus()]

    def one(path):
        try:
            return path, oracle.inventory_list(path)
        except RuntimeError as exc:
            return path, exc
    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(one, paths))


def _patterns(inv) -> list:
    groups = [g for g in inv.groups if g not in ("all", "ungrouped")]
    out = ["all", "ungrouped", "all:!ungrouped", "*"] + groups[:8]
    if len(groups) >= 2:
        a, b = groups[0], groups[1]
        out += [f"{a}:&{b}", f"{a}:!{b}", f"{a},{b}", f"{b}:{a}", f"{a}[0]", f"{b}[-1]", f"{a}[0:1]",
                f"!{a}"]
    hosts = list(inv.hosts)
    if hosts:
        out += [hosts[0], hosts[-1][:3] + "*", "~" + hosts[-1][:2] + ".*"]
    return out


@pytest.fixture(scope="module")
def selections():
    """ansible-core's answers for each inventory's patterns, under two hash seeds."""
    items, invs = [], {}
    for param in corpus():
        path = param.values[0]
        try:
            invs[path] = inv = load_inventory(path)
        except BadInput:
            continue
        items.append({"inventory": path, "patterns": _patterns(inv)})
    runs = [oracle.select_many(items, hash_seed=seed) for seed in ("0", "1")]
    return {item["inventory"]: (a, b) for item, a, b in zip(items, *runs)}


@pytest.mark.parametrize("path", corpus())
def test_inventory_reads_as_ansible_core_reads_it(path, listings):
    want = listings[path]
    if isinstance(want, Exception):
        with pytest.raises(BadInput):
            load_inventory(path)
        return
    inv = load_inventory(path)
    groups_of = oracle.membership(want)
    assert list(inv.hosts) and set(inv.hosts) == set(groups_of) or not groups_of and not inv.hosts
    hostvars = want["_meta"]["hostvars"]
    for host in groups_of:
        got = inv.get_vars(host)
        assert got["group_names"] == groups_of[host], host
        got = {k: v for k, v in got.items() if k not in MAGIC}
        assert json.loads(json.dumps(got, default=str)) == hostvars.get(host, {}), host


@pytest.mark.parametrize("path", corpus())
def test_patterns_select_as_ansible_core(path, selections, listings):
    if path not in selections:          # fleetops refuses it: so must ansible-core
        assert isinstance(listings[path], Exception)
        return
    first, second = selections[path]
    assert "error" not in first, first
    inv = load_inventory(path)
    # below depth 1 ansible-core walks a set of groups: its order there is the hash seed's
    seeded = any(g.depth >= 2 for g in inv.groups.values())
    for pattern, want in first["patterns"].items():
        if isinstance(want, str):
            with pytest.raises(BadInput):
                inv.select(pattern)
            continue
        got = inv.select(pattern)
        if seeded or want != second["patterns"][pattern]:      # ansible-core's own order moves with the seed
            assert sorted(got) == sorted(want), pattern
        else:
            assert got == want, pattern
    for host, short in first["short"].items():
        assert inv.get_vars(host)["inventory_hostname_short"] == short
