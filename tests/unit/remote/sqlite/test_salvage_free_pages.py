"""Deleted rows stay deleted when the evidence of what is free is damaged: a store whose
deleted sessions and messages still sit on freelist pages (real SessionDB, secure_delete=OFF),
its freelist pointer, trunk page or header destroyed, or the file cut short. Checked row by
row against ground truth; the rows held back are in the quarantine with their reason."""
import json

from tests.unit.remote.sqlite.test_salvage_corpus import out_rows

FREE_CASES = ["freelist_trunk_pointer_damaged", "freelist_trunk_page_damaged",
              "truncated_copy", "header_zeroed"]


def _quarantine(rep):
    if not rep["quarantine_file"]:
        return []
    with open(rep["quarantine_file"]) as fh:
        return [json.loads(x) for x in fh]


def test_cases_have_deleted_sessions_on_free_pages(salvaged):
    for name in FREE_CASES:
        d = salvaged(name).d
        assert d.deleted_on_freelist["sessions"] and d.deleted_on_freelist["messages"], name


def test_trunk_pointer_damaged_free_pages_found_by_shape(salvaged):
    r = salvaged("freelist_trunk_pointer_damaged")
    ev = r.rep["freelist"]["evidence"]
    assert ev["complete"] and ev["trunks_found_by_shape"]
    assert ev["known_free"] == ev["header_freelist_count"]
    assert r.rep["held_back"]["rows"] == 0
    assert r.rep["verdict"] == "complete" and r.rep["loss_rows"] == 0


def test_trunk_page_damaged_orphans_held_back_with_reason(salvaged):
    r = salvaged("freelist_trunk_page_damaged")
    rep = r.rep
    assert not rep["freelist"]["evidence"]["complete"]
    hb = rep["held_back"]
    assert hb["rows"] > 0 and set(hb["by_reason"]) == {"tree intact"}
    held = [x for x in _quarantine(rep) if x["reason"].startswith("held back: ")]
    assert len(held) == hb["rows"]
    assert sum(sum(x["held_back_rows"].values()) for x in rep["tables"].values()) <= hb["rows"]
    # every deleted row is absent from the output; those the lost trunk listed are held back
    held_ids = {(x["table"], x["rowid"]) for x in held}
    for t, ids in r.d.deleted_on_freelist.items():
        assert not ids & set(out_rows(r.out, t))
    assert any(t == "sessions" for t, _ in held_ids)
    # deleted rows are never counted as lost, and the trees are whole: complete
    assert rep["loss_rows"] == 0 and rep["verdict"] == "complete"


def test_truncated_copy_loss_is_exactly_what_the_cut_took(salvaged):
    r = salvaged("truncated_copy")
    rep = r.rep
    dropped, cut = r.d.extra["fk_dropped"], r.d.extra["chain_cut"]
    assert cut, "the cut should leave some rows whose overflow chain runs past it"
    for t, x in rep["tables"].items():
        # identified (their key is on a kept leaf) but unreadable, or orphaned by a lost
        # parent; and the rows on lost pages that the indexes name
        assert x["loss_rows"] == (len(dropped.get(t, ())) + len(cut.get(t, ()))
                                  + x["lost_known_from_indexes"]), t
        assert set(x["lost_rowids_from_indexes"]) <= r.d.lost_rows.get(t, set()), t
        assert x["quarantine_reasons"].get("FOREIGN KEY", 0) == len(dropped.get(t, ())), t
    assert rep["verdict"] == "partial"
    assert rep["held_back"]["rows"] > 0


def test_header_zeroed_free_pages_found_again(salvaged):
    r = salvaged("header_zeroed")
    ev = r.rep["freelist"]["evidence"]
    assert ev["header_freelist_count"] is None and ev["complete"]
    assert len(ev["trunks_found_by_shape"]) >= 1
    assert r.rep["verdict"] == "complete" and r.rep["held_back"]["rows"] == 0
