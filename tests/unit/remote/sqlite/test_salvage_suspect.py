"""Content that decodes but cannot be what was written is flagged, kept, and never called a
complete salvage: NUL runs from a zeroed overflow page, an overflow chain longer than its
payload, storage classes the column's affinity would have converted."""
import json

from fleetops.remote.sqlite.salvage import model
from tests.unit.remote.sqlite.test_salvage_corpus import out_rows


def test_overflow_damage_flagged_and_counted(salvaged):
    r = salvaged("overflow_chains_damaged")
    m = r.rep["tables"]["messages"]
    a, b, cut = (r.d.extra[k] for k in ("zeroed_tail", "chain_too_long", "chain_cut"))
    sus = m["suspect_rows"]
    assert set(sus) == {str(a), str(b)} and m["suspect_count"] == 2
    assert any("all zeros" in x for x in sus[str(a)])
    assert any("NUL" in x for x in sus[str(a)])
    assert any("longer than the payload" in x for x in sus[str(b)])
    got = out_rows(r.out, "messages")
    assert a in got and b in got and cut not in got
    # the cut row is identified and quarantined, never dropped silently
    assert m["loss_rows"] == 1 and m["quarantined"] == 1
    with open(r.rep["quarantine_file"]) as fh:
        q = [json.loads(x) for x in fh]
    assert [x["rowid"] for x in q if x["table"] == "messages"] == [cut]
    assert r.rep["verdict"] == "partial"
    assert any("content is in doubt" in x for x in m["verdict_reasons"])


def test_healthy_store_has_nothing_suspect(salvaged):
    rep = salvaged("healthy").rep
    assert all(x["suspect_count"] == 0 for x in rep["tables"].values())


def test_affinity_rules():
    t = model.Table("x", "CREATE TABLE x(a TEXT, b INTEGER, c REAL, d)", 2)
    t.columns, t.affinity = ["a", "b", "c", "d"], ["TEXT", "INTEGER", "REAL", "BLOB"]
    assert model.affinity_doubts(t, ["s", 1, 1.5, 7]) == []
    assert model.affinity_doubts(t, [3, None, None, None]) == ["a: a int in a TEXT column"]
    assert model.affinity_doubts(t, [None, " 12 ", None, None]) == ["b: numeric text in a INTEGER column"]
    assert model.affinity_doubts(t, [None, 2.0, "1e3", None]) == [
        "b: an integral REAL in an INTEGER column", "c: numeric text in a REAL column"]
    assert model.affinity_doubts(t, ["ok" + "\x00" * 8, None, None, "\x00" * 9]) == [
        "a: a run of NUL characters in text", "d: a run of NUL characters in text"]
