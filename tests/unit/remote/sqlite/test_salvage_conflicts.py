"""Two versions of one key: the salvage tries them in order of evidence until one goes in.

The corpus case: a messages interior page points at a sessions leaf, so SQLite's walk of
messages returns sessions records under the keys of the messages leaf it replaced (now an
intact orphan). The foreign records fail messages' NOT NULL columns or reference no session."""
import json

import pytest

from fleetops.remote.sqlite import salvage as engine
from fleetops.remote.hermes.salvage_rules import RULES
from fleetops.remote.sqlite.salvage import scan, write
from tests.corpus import damage, truth
from tests.unit.remote.sqlite.test_salvage_corpus import out_rows


def test_foreign_leaf_rows_not_taken_for_messages(salvaged):
    r = salvaged("interior_points_at_foreign_leaf")
    m = r.rep["tables"]["messages"]
    assert r.d.extra["conflicting_keys"], "the case must give two versions of some keys"
    assert m["foreign_rows_read"] == len(r.d.extra["conflicting_keys"])
    assert m["loss_rows"] == 0 and m["quarantined"] == 0
    assert r.rep["tables"]["sessions"]["saved"] == len(r.d.expected_rows["sessions"])
    assert r.rep["verdict"] == "complete"


@pytest.mark.parametrize("evidence", ["ranges only", "none"])
def test_versions_tried_until_one_goes_in(pristine, tmp_path, monkeypatch, evidence):
    """Without knowing which page the walk read (and, second, without the ranges where it
    read another tree's page), the walk's foreign version is tried and refused, and the
    intact one still goes in."""
    monkeypatch.setattr(scan, "foreign_leaves", lambda s, st: None)
    if evidence == "none":
        monkeypatch.setattr(write, "foreign_ranges", lambda s, st: [])
    d = damage.make("interior_points_at_foreign_leaf", pristine, tmp_path / "c" / "state.db")
    out = tmp_path / "out.db"
    rep = engine.salvage(d.path, str(out), fts="leave-to-hermes", rules=RULES)
    gt = truth.ground_truth(d.truth_path)
    got = out_rows(str(out), "messages")
    assert set(got) == d.expected_rows["messages"]
    for k in d.extra["conflicting_keys"]:
        assert got[k] == gt["tables"]["messages"]["rows"][k]
    m = rep["tables"]["messages"]
    assert m["conflicting_versions"] == len(d.extra["conflicting_keys"])
    with open(rep["quarantine_file"]) as fh:
        recs = [json.loads(x) for x in fh]
    lost = [x for x in recs if x["table"] == "messages"]
    assert {x["rowid"] for x in lost} == d.extra["conflicting_keys"]
    assert all("conflicting version" in x["reason"] for x in lost)
