"""The newer Hermes versions of the matrix: stores written by their own SessionDB (0.20.1:
schema 26, external-content FTS over `messages` and a view, triggers gated on state_meta keys,
DELETE journal on a SQLite with the WAL-reset bug), damaged by the corpus tools.

Every case gets its audit verdict; a representative subset is salvaged (the full list runs for
the oldest version in test_salvage_corpus.py, whose checks these reuse): every recoverable row
back with its values, the journal mode, header fields and schema objects of the source, and
complete verified FTS tables with their triggers answering searches.
"""
import pytest

from fleetops.remote.hermes import audit as hermes_audit
from tests.support import hermes_matrix
from tests.corpus import damage

from tests.unit.remote.sqlite.test_salvage_corpus import check_kept, check_rows_exact, check_verified, out_rows

# one case per kind of damage: FTS pages, a duplicated row, a hidden interior page, lost
# leaves, a NOT NULL repair, an emptied unique index, deleted rows on the freelist, a stale
# sessions leaf, a flipped child pointer
SALVAGE_CASES = ["healthy", "fts_pages_overwritten", "session_duplicated_behind_title_index",
                 "interior_page_zeroed", "garbage_leaf_pages", "not_null_nulled",
                 "unique_index_emptied", "deleted_on_freelist", "sessions_leaf_lost_write",
                 "interior_child_pointer_bit_flipped"]
# torn_wal needs a WAL store; these versions write DELETE stores on the suite's SQLite
AUDIT_CASES = sorted(set(damage.ALL_CASES) - {"torn_wal"})


@pytest.mark.parametrize("case", AUDIT_CASES)
@pytest.mark.parametrize("version", hermes_matrix.NEWER)
def test_audit_verdict(salvaged_of, version, case, tmp_path):
    r = salvaged_of(version)("healthy")
    d = damage.make(case, r.src, tmp_path / case / "state.db")
    res = hermes_audit.main({"db_path": str(d.path), "tooling": False, "holders": False})
    assert res["failed"] is False, res.get("msg")
    rec = res["databases"][0]
    assert rec["verdict"] == d.expect_verdict, rec["reasons"]
    by_obj = (rec["integrity"] or {}).get("by_object") or {}
    assert set(by_obj) == set(d.expect_errors_in)


@pytest.mark.parametrize("case", SALVAGE_CASES)
@pytest.mark.parametrize("version", hermes_matrix.NEWER)
def test_salvage_keeps_rows_and_shape(salvaged_of, version, case):
    r = salvaged_of(version)(case)
    assert r.rep["source_format"]["journal_mode"] == "delete"    # as that Hermes made it
    check_rows_exact(r)
    check_verified(r)
    check_kept(r)
    for deleted in (r.d.deleted_on_freelist, r.d.deleted_in_file):
        for table, ids in deleted.items():
            assert not (set(out_rows(r.out, table)) & (ids - r.d.expected_rows.get(table, set())))
    assert r.before == r.after


@pytest.mark.parametrize("version", hermes_matrix.NEWER)
def test_external_content_fts_rebuilt_not_left(salvaged_of, version):
    """The FTS tables are external content (messages, a view) with state_meta-gated triggers:
    built by salvage, complete (FTS5 integrity-check against their content), never left to Hermes."""
    rep = salvaged_of(version)("fts_pages_overwritten").rep
    assert rep["verdict"] == "complete"
    for name, f in rep["fts"].items():
        assert f["mode"] == "rebuild" and f["build"] == "scratch" and f["created"], (name, f)
        assert f["integrity_check"] == "ok" and len(f["triggers"]) == 3
    assert not [n for n in rep["notes"] if "Hermes" in n]
