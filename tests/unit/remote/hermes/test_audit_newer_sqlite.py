"""Where the host's SQLite runs FTS5's own integrity check inside quick_check (3.44+; here the 3.51
of pysqlite3-binary, as on Debian 13 or Ubuntu 24.04), the audit takes quick_check's word for the
FTS tables and walks no index again, and still gives every corpus case its verdict."""
from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from fleetops.remote.hermes import audit as hermes_audit
from fleetops.remote.hermes import audit_fts
from tests.corpus import damage
from tests.support.paths import REPO

CASES = sorted(damage.ALL_CASES)


def _newer(paths, extra=()):
    p = subprocess.run([sys.executable, "-m", "tests.support.newer_sqlite"] + list(extra) + [str(x) for x in paths],
                       cwd=str(REPO), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert tuple(int(x) for x in out["sqlite_version"].split(".")) >= (3, 44, 0), out["sqlite_version"]
    return out


@pytest.fixture(scope="module")
def corpus(standard_src, tmp_path_factory):
    base = tmp_path_factory.mktemp("newer-sqlite")
    made = {c: damage.make(c, standard_src, base / c / "state.db") for c in CASES}
    return made, _newer([d.path for d in made.values()])


def test_the_probe_tells_the_two_sqlites_apart(corpus):
    _, out = corpus
    assert out["covers"] is True
    # the machine's own SQLite: the probe agrees with the version that brought xIntegrity
    assert audit_fts.quick_check_covers_fts5() is (sqlite3.sqlite_version_info >= (3, 44, 0))


@pytest.mark.parametrize("case", CASES)
def test_every_corpus_case_keeps_its_verdict(case, corpus):
    made, out = corpus
    d = made[case]
    rec = out["records"][d.path]
    assert rec["verdict"] == d.expect_verdict, rec["reasons"]
    for name, f in (rec["fts"] or {}).items():
        assert f["index_tokens"] is None and f["terms"] is None, (name, f)      # no index walk
        if f["checked"]:
            assert "runs FTS5's own integrity check" in f["checked_by"]
            assert f["ok"] is (not f["quick_check_errors"]) and f["probe"] is not None


def test_a_flipped_bit_is_blamed_on_its_own_index(corpus):
    made, out = corpus
    d = made["fts_doclist_bit_flipped"]
    rec = out["records"][d.path]
    assert set(rec["integrity"]["by_object"]) == {"messages_fts_trigram"}
    assert rec["fts"]["messages_fts_trigram"]["ok"] is False
    assert rec["fts"]["messages_fts"]["ok"] is True          # a name that starts the same is not blamed
    host = hermes_audit.main({"db_path": d.path, "tooling": False, "holders": False})["databases"][0]
    assert host["verdict"] == "fts_index_damage"
    if not audit_fts.quick_check_covers_fts5():               # the walk found it where quick_check cannot
        assert host["integrity"]["by_object"] == {}
        assert host["fts"]["messages_fts_trigram"]["errors"], host["fts"]


def test_a_quick_check_that_stopped_leaves_the_fts_tables_named_unchecked(corpus):
    made, out = corpus
    rec = out["records"][made["fts_pages_overwritten"].path]
    assert rec["verdict"] == "fts_index_damage"
    assert rec["integrity"]["aborted"]
    skipped = {s["check"]: s["reason"] for s in rec["skipped_checks"]}
    assert set(skipped) == {"fts:messages_fts", "fts:messages_fts_trigram"}
    assert all("quick_check stopped before FTS5's own check" in r for r in skipped.values())


# The one case whose only evidence is FTS5's own check, which a budgeted audit does not run.
ONLY_FTS5_OWN_CHECK_SEES = {"fts_doclist_bit_flipped"}


@pytest.fixture(scope="module")
def budgeted(corpus):
    made, _ = corpus
    return _newer([d.path for d in made.values()], ["--budget", "0.00001"])["records"]


@pytest.mark.parametrize("case", CASES)
def test_a_budget_checks_every_btree_table_by_table_and_names_what_it_left_out(case, corpus, budgeted):
    made, out = corpus
    d = made[case]
    full, rec = out["records"][d.path], budgeted[d.path]
    skipped = [s["check"] for s in rec["skipped_checks"]]
    if rec["integrity"] is None:                      # never opened: nothing to budget
        assert rec["verdict"] == full["verdict"] == d.expect_verdict and skipped == []
        return
    assert skipped[0] == "page_accounting" and "quick_check ran table by table" in rec["skipped_checks"][0]["reason"]
    tables = rec["integrity"]["by_table"]
    assert "sqlite_master" in tables and "messages_fts_trigram_data" in tables and "messages" in tables
    assert "messages_fts_trigram" not in tables       # no virtual table's own check
    fts = sorted(rec["fts"])
    if rec["verdict"] == "structural_corruption":
        assert skipped[1:] == ["fts:" + n for n in fts]
    else:
        assert skipped[1:] == ["fts_walk:" + n for n in fts]
        for n in fts:
            assert rec["fts"][n].get("checked_by") is None and "FTS5's own integrity check" in rec["fts"][n]["walk_skipped"]
            assert rec["fts"][n]["docsize_tokens"] is not None and rec["fts"][n]["probe"] is not None
    if case in ONLY_FTS5_OWN_CHECK_SEES:
        assert full["verdict"] == d.expect_verdict != "healthy" and rec["verdict"] == "healthy"
        assert "fts_walk:messages_fts_trigram" in skipped                # the evidence it lacks is named
    else:
        assert rec["verdict"] == full["verdict"] == d.expect_verdict, rec["reasons"]
