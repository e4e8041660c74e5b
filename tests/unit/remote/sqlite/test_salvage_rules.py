"""Salvage rules on small Hermes-like files (stdlib sqlite3): repairs, conflicts, FK
orphans, FTS modes, the CLI and the payload contract."""
import json
import os
import sqlite3

import pytest

from fleetops.hermes import salvage_cli
from fleetops.remote.sqlite import salvage as engine
from fleetops.remote.hermes.salvage_rules import RULES
from tests.support import hermeslike as h


@pytest.fixture
def db(tmp_path):
    p = str(tmp_path / "state.db")
    h.build(p, sessions=12, msgs=(3, 6), big_every=0)
    return p


def _relax(path, sql_edit):
    """Rewrite a table's DDL through writable_schema (how a row can come to break it)."""
    c = sqlite3.connect(path)
    c.execute("PRAGMA writable_schema=ON")
    for name, old, new in sql_edit:
        c.execute("UPDATE sqlite_schema SET sql = replace(sql, ?, ?) WHERE name = ?", (old, new, name))
    c.commit()
    c.close()


def _run(db, tmp_path, **kw):
    out = str(tmp_path / "out.db")
    return engine.salvage(db, out, rules=RULES, **kw), out


def _quarantine(rep):
    with open(rep["quarantine_file"]) as fh:
        return [json.loads(x) for x in fh]


def test_messages_timestamp_null_repaired_from_previous_message(db, tmp_path):
    _relax(db, [("messages", "timestamp REAL NOT NULL", "timestamp REAL")])
    c = sqlite3.connect(db)
    sid, mid = c.execute("SELECT session_id, max(id) FROM messages GROUP BY session_id LIMIT 1").fetchone()
    prev = c.execute("SELECT timestamp FROM messages WHERE session_id = ? AND id < ? ORDER BY id DESC "
                     "LIMIT 1", (sid, mid)).fetchone()[0]
    c.execute("UPDATE messages SET timestamp = NULL WHERE id = ?", (mid,))
    c.commit()
    c.close()
    _relax(db, [("messages", "timestamp REAL", "timestamp REAL NOT NULL")])
    rep, out = _run(db, tmp_path)
    m = rep["tables"]["messages"]
    assert m["repaired"] == 1 and m["repairs"][0]["rowid"] == mid and m["loss_rows"] == 0
    c = sqlite3.connect(out)
    assert c.execute("SELECT timestamp FROM messages WHERE id = ?", (mid,)).fetchone()[0] == prev
    c.close()
    assert rep["verdict"] == "complete"


def test_duplicate_title_keeps_first_and_quarantines_other(db, tmp_path):
    """Two different sessions with one title behind a healthy-looking unique index: the
    field report's batch killer. One row is quarantined, every other row is saved."""
    c = sqlite3.connect(db)
    rows = c.execute("SELECT rowid, title FROM sessions WHERE title IS NOT NULL ORDER BY rowid").fetchall()
    n = c.execute("SELECT count(*) FROM sessions").fetchone()[0]
    c.close()
    data = bytearray(open(db, "rb").read())
    (r1, t1), (r2, t2) = [(a, b) for a in rows for b in rows if a[0] < b[0]
                          and len(a[1].encode()) == len(b[1].encode())][0]
    ps = h.page_size(db)
    pg = [p for p, ids in h.leaf_rowids(db, "sessions") if r2 in ids][0]
    i = data.find(t2.encode(), (pg - 1) * ps, pg * ps)      # in the table, not the index
    assert i > 0
    data[i:i + len(t2.encode())] = t1.encode()     # byte-level: the table row now says t1
    open(db, "wb").write(bytes(data))
    rep, out = _run(db, tmp_path)
    s = rep["tables"]["sessions"]
    assert (s["identified"], s["saved"], s["quarantined"], s["loss_rows"]) == (n, n - 1, 1, 1)
    assert s["verdict"] == "partial" and rep["verdict"] == "partial"
    q = _quarantine(rep)
    assert [x["rowid"] for x in q if x["table"] == "sessions"] == [r2]
    assert "UNIQUE" in q[0]["reason"]


def test_conflicting_versions_same_key(db, tmp_path):
    """Same rowid twice with different content: the first kept, the other quarantined,
    and the loss is reported (never 'no loss')."""
    from tests.corpus.pagefile import PageFile
    c = sqlite3.connect(db)
    root = c.execute("SELECT rootpage FROM sqlite_schema WHERE name='state_meta'").fetchone()[0]
    c.close()
    with PageFile(db, writable=True) as pf:
        page = pf.parse_page(root)
        cells = pf.cells(page)
        imgs = [pf.cell_image(page, x) for x in cells]
        k = [i for i, im in enumerate(imgs) if chr(im[-1]).isalpha()][0]   # ends in ASCII text
        twin = bytearray(imgs[k])
        twin[-1] = ord("Z") if twin[-1] != ord("Z") else ord("Y")
        imgs.insert(k + 1, bytes(twin))
        pf.write_page(root, pf.build_page(page, imgs))
    rep, out = _run(db, tmp_path)
    s = rep["tables"]["state_meta"]
    assert (s["identified"], s["saved"], s["conflicting_versions"], s["quarantined"],
            s["loss_rows"], s["verdict"]) == (5, 4, 1, 1, 1, "partial")
    assert "conflicting version" in _quarantine(rep)[0]["reason"]


def test_fk_orphans_quarantined_and_dangling_parent_nulled(db, tmp_path):
    c = sqlite3.connect(db)
    c.execute("PRAGMA foreign_keys=OFF")
    victim = c.execute("SELECT id FROM sessions WHERE id IN (SELECT session_id FROM messages) "
                       "ORDER BY rowid LIMIT 1 OFFSET 3").fetchone()[0]
    orphans = [r[0] for r in c.execute("SELECT id FROM messages WHERE session_id = ?", (victim,))]
    child = c.execute("SELECT rowid FROM sessions WHERE id != ? ORDER BY rowid DESC LIMIT 1",
                      (victim,)).fetchone()[0]
    c.execute("UPDATE sessions SET parent_session_id = ? WHERE rowid = ?", (victim, child))
    c.execute("DELETE FROM sessions WHERE id = ?", (victim,))
    c.commit()
    c.close()
    rep, out = _run(db, tmp_path)
    m = rep["tables"]["messages"]
    assert m["quarantined"] == len(orphans) == m["loss_rows"] > 0
    assert sorted(x["rowid"] for x in _quarantine(rep) if x["table"] == "messages") == sorted(orphans)
    s = rep["tables"]["sessions"]
    assert s["repaired"] == 1 and s["repairs"][0]["was"] == [victim]
    assert rep["verification"]["foreign_key_check"] == [] and rep["verdict"] == "partial"


def test_leave_to_hermes_drops_fts_and_its_triggers(db, tmp_path):
    rep, out = _run(db, tmp_path, fts="leave-to-hermes")
    c = sqlite3.connect(out)
    names = [r[0] for r in c.execute("SELECT name FROM sqlite_schema")]
    c.close()
    assert not [n for n in names if "fts" in n]
    assert rep["verdict"] == "complete"
    assert all(f["mode"] == "leave-to-hermes" for f in rep["fts"].values())


def test_fts_that_host_cannot_build_falls_back_whole(db, tmp_path):
    """A tokenizer this SQLite lacks: that FTS table and its three triggers are left for
    Hermes, the other FTS table is rebuilt and verified; no crash."""
    _relax(db, [("messages_fts_trigram", "tokenize='trigram'", "tokenize='nosuchtok'")])
    rep, out = _run(db, tmp_path)
    assert rep["fts"]["messages_fts_trigram"]["mode"] == "leave-to-hermes"
    assert "nosuchtok" in rep["fts"]["messages_fts_trigram"]["reason"]
    assert rep["fts"]["messages_fts"]["match_ok"] is True
    c = sqlite3.connect(out)
    names = [r[0] for r in c.execute("SELECT name FROM sqlite_schema")]
    c.close()
    assert not [n for n in names if n.startswith("messages_fts_trigram")]
    assert sum(1 for n in names if n.startswith("messages_fts_") and n.endswith(
        ("insert", "delete", "update"))) == 3
    assert rep["verdict"] == "failed" and rep["verification"]["fts_not_rebuilt"]


def test_output_never_overwritten_and_source_checked(db, tmp_path):
    out = tmp_path / "out.db"
    out.write_bytes(b"keep me")
    with pytest.raises(engine.SalvageInputError):
        engine.salvage(db, str(out), rules=RULES)
    assert out.read_bytes() == b"keep me"


def test_cli_exit_codes_and_json(db, tmp_path, capsys):
    args = {"source": db, "output": str(tmp_path / "o1.db"), "report": str(tmp_path / "r.json"),
            "fts": "rebuild", "schema_from": None, "json": True}
    assert salvage_cli.salvage(args) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["verdict"] == "complete"
    assert json.load(open(str(tmp_path / "r.json")))["verdict"] == "complete"
    assert salvage_cli.salvage(dict(args, output=str(tmp_path / "o1.db"))) == 4   # exists
    bad = tmp_path / "bad.db"
    bad.write_text("not a database")
    assert salvage_cli.salvage(dict(args, source=str(bad), output=str(tmp_path / "o2.db"))) == 4
    capsys.readouterr()
    _relax(db, [])
    c = sqlite3.connect(db)
    c.execute("PRAGMA foreign_keys=OFF")
    c.execute("DELETE FROM sessions WHERE rowid = (SELECT min(rowid) FROM sessions)")
    c.commit()
    c.close()
    assert salvage_cli.salvage(dict(args, output=str(tmp_path / "o3.db"), json=False)) == 2
    assert "partial" in capsys.readouterr().out


def test_payload_main_contract(db, tmp_path):
    res = engine.main({"source": db, "output": str(tmp_path / "p.db")})
    assert set(res) >= {"changed", "failed", "skipped", "msg"}
    assert res["changed"] and not res["failed"] and res["report"]["verdict"] == "complete"
    res = engine.main({"source": db, "output": str(tmp_path / "p2.db"), "_check": True})
    assert res["skipped"] and not os.path.exists(str(tmp_path / "p2.db"))
    res = engine.main({"source": str(tmp_path / "nope.db"), "output": str(tmp_path / "p3.db")})
    assert res["failed"] and res["bad_input"]
