"""The repair play on stores of every Hermes version of the matrix, each held by that version's
own gateway, on the sshd lab; and a host whose two profiles hold a 0.19.0-shaped and a
0.20.1-shaped store, both repaired in one run.

The newer versions' gateways run as their systemd unit runs them (`python -m hermes_cli.main
[--profile P] gateway run`) from that version's venv. No hermes_bin is given: verify must find
each profile's own Hermes from the command line of the gateway holding it, and that Hermes'
`sessions stats` and a search through its own SessionDB must read the new file.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from fleetops.remote.hermes import holders as hermes_holders
from tests.support import hermes_matrix
from tests.corpus import build, damage

from tests.support.lab_seed import results_by_task, run_cli
from tests.lab.repair.test_repair_play import integrity, rowids

pytestmark = pytest.mark.lab
VERIFY = "verify (write probe, quick_check, counts, FTS, hermes sessions stats)"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """stores(version) -> the standard store of that version (skips when its venv is absent)."""
    made = {}

    def get(version):
        if version not in made:
            hermes_matrix.lab_ready(version)
            p = tmp_path_factory.mktemp("lab-store-%s" % version) / "state.db"
            build.standard_db(p, hermes=version)
            made[version] = p
        return made[version]

    return get


def failures(doc):
    """The failed results of a run, for an assertion message."""
    return {(t, h): r[1].get("msg") or [x.get("msg") for x in r[1].get("results") or []]
            for t, hs in results_by_task(doc).items() for h, r in hs.items() if r[0] == "failed"}


def header_journal_mode(db):
    with open(db, "rb") as fh:
        return "wal" if fh.read(20)[18:20] == b"\x02\x02" else "delete"


def seed_profile(seeder, name, version, case, profile, tmp_path, stores):
    d = damage.make(case, stores(version), tmp_path / name / (profile or "default") / "state.db")
    seeder.seed_image(name, d.path, profile=profile)
    venv = None if version == hermes_matrix.OLDEST else hermes_matrix.get(version).lab_venv
    pid = seeder.gateway(name, profile=profile, venv=venv)
    return d, pid, header_journal_mode(d.path)


def check_repaired(seeder, by, name, profile, d, pid, mode, version):
    h = seeder.host(name, profile)
    db = h["db"]
    assert integrity(db) == ["ok"], (name, profile)
    for table, ids in d.expected_rows.items():     # every row back (a live gateway may add more)
        missing = ids - rowids(db, table)
        assert not missing, (name, profile, table, sorted(missing)[:10])
    assert header_journal_mode(db) == mode, (name, profile)        # never switched
    # the old gateway stopped, a new one running (its gateway.pid; it need not hold the store at
    # this instant: 0.20.1 reopens its connections); that it reads the new file is verify's proof
    new_pid = json.loads((Path(h["profile_home"]) / "gateway.pid").read_text())["pid"]
    assert new_pid != pid and hermes_holders.alive(new_pid) and not hermes_holders.alive(pid), (name, profile)
    vres = next(r for r in by[VERIFY][name][1]["results"] if r["r"]["profile"] == (profile or "default"))
    ch = vres["checks"]
    assert not vres["failed"], vres["msg"]
    assert ch["hermes"]["found_by"].startswith("the command line of holder PID"), ch["hermes"]
    assert hermes_matrix.get(version).lab_venv.name in " ".join(ch["hermes"]["command"]) or \
        version == hermes_matrix.OLDEST, ch["hermes"]
    assert ch["hermes_sessions_stats"]["ok"] is True
    assert ch["hermes_sessions_stats"]["numbers"].get("messages") == len(d.expected_rows["messages"])
    s = ch["hermes_search"]
    assert s["ok"] and s["hits"] >= 1, s
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        assert c.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                         "AND name LIKE 'messages_fts%'").fetchone()[0] >= 6
    finally:
        c.close()


@pytest.mark.parametrize("version", hermes_matrix.NEWER)
def test_newer_version_repaired_with_its_own_gateway(lab, seeder, stores, version, tmp_path):
    """Structural damage (salvage) and FTS damage (FTS rebuild) on that version's stores."""
    plan = {"lab01": "garbage_leaf_pages", "lab02": "fts_pages_overwritten"}
    seeded = {n: seed_profile(seeder, n, version, case, None, tmp_path, stores) for n, case in plan.items()}
    rc, doc = run_cli(lab, tmp_path / "runs", "-l", ",".join(plan))
    by = results_by_task(doc)
    assert rc == 0, failures(doc)
    for name, (d, pid, mode) in seeded.items():
        st, res = by["outcome: REPAIRED"][name]
        assert st == "changed" and res["msg"].startswith("REPAIRED: default was "), res
        check_repaired(seeder, by, name, None, d, pid, mode, version)
    paths = {n: by["repair on a copy, verify the new file"][n][1]["results"][0]["path"] for n in plan}
    assert paths == {"lab01": "salvage", "lab02": "fts_rebuild"}


def test_two_profiles_of_two_shapes_repaired_in_one_run(lab, seeder, stores, tmp_path):
    """default: a 0.19.0 store (WAL, inline FTS) under a 0.19.0 gateway; work: a 0.20.1 store
    (DELETE, external-content FTS) under a 0.20.1 gateway; both damaged, one run repairs both."""
    # 0.20.1: from 0.22 on one host gateway serves every profile, and a per-profile one refuses to start
    newer = "0.20.1"
    name = "lab03"
    d0, pid0, mode0 = seed_profile(seeder, name, hermes_matrix.OLDEST, "garbage_leaf_pages", None, tmp_path, stores)
    d1, pid1, mode1 = seed_profile(seeder, name, newer, "fts_pages_overwritten", "work", tmp_path, stores)
    assert (mode0, mode1) == ("wal", "delete")
    rc, doc = run_cli(lab, tmp_path / "runs", "-l", name, "-e", '{"hermes_profiles": ["default", "work"]}')
    by = results_by_task(doc)
    assert rc == 0, failures(doc)
    st, res = by["outcome: REPAIRED"][name]
    assert st == "changed" and "default was " in res["msg"] and "work was " in res["msg"], res
    paths = {r["profile"]: r["path"] for r in by["repair on a copy, verify the new file"][name][1]["results"]}
    assert paths == {"default": "salvage", "work": "fts_rebuild"}, paths
    check_repaired(seeder, by, name, None, d0, pid0, mode0, hermes_matrix.OLDEST)
    check_repaired(seeder, by, name, "work", d1, pid1, mode1, newer)
