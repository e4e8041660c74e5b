"""Which side of a table/index disagreement is wrong: when every index of a table agrees against
it, the table's page is the stale copy (a lost write), not the indexes."""
from __future__ import annotations

from fleetops.remote.hermes import audit_verdict


def _rec(indexes):
    h = {"errors": [], "duplicates": 0, "count": 10, "count_scan": 10, "distinct_rowid": 10,
         "distinct_pk": None, "indexes": indexes}
    return {"integrity": {}, "holders": None, "honesty": {"sessions": h}}


def _idx(lacks=(), excess=()):
    return {"entries": 10, "expected": 10, "ok": not (lacks or excess), "lacks": len(lacks),
            "excess": len(excess), "lacks_rows": list(lacks), "excess_rows": list(excess)}


def test_a_row_no_index_holds_is_a_stale_table():
    verdict, _, reasons = audit_verdict.classify(_rec({"a": _idx(lacks=[7]), "b": _idx(lacks=[7]),
                                                        "c": _idx(lacks=[7])}))
    assert verdict == "structural_corruption"
    assert "rowid 7" in reasons[0] and "lost write" in reasons[0]


def test_a_row_two_indexes_hold_with_other_values_is_a_stale_table():
    verdict, _, _ = audit_verdict.classify(_rec({"title": _idx(lacks=[3], excess=[3]),
                                                  "title_lower": _idx(lacks=[3], excess=[3]), "started": _idx()}))
    assert verdict == "structural_corruption"


def test_one_flipped_index_key_is_index_damage():
    verdict, _, _ = audit_verdict.classify(_rec({"a": _idx(lacks=[3], excess=[3]), "b": _idx()}))
    assert verdict == "index_damage"


def test_a_renumbered_row_whose_values_every_index_holds_is_index_damage():
    verdict, _, _ = audit_verdict.classify(_rec({"a": _idx(lacks=[2 ** 40 + 40], excess=[40]),
                                                  "b": _idx(lacks=[2 ** 40 + 40], excess=[40])}))
    assert verdict == "index_damage"


def test_with_one_index_the_audit_cannot_tell_and_says_index_damage():
    verdict, _, _ = audit_verdict.classify(_rec({"a": _idx(lacks=[7])}))
    assert verdict == "index_damage"
