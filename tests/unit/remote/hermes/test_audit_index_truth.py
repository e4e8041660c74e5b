"""An index entry whose key bit flipped: every count still agrees, integrity_check says "row N missing
from index", and the default audit must name the index and the row (not "N entries, table has N")."""
from __future__ import annotations

import shutil
import sqlite3

import pytest

from fleetops.remote.hermes import audit as hermes_audit


def _audit(path):
    res = hermes_audit.main({"db_path": str(path), "tooling": False, "holders": False})
    assert res["failed"] is False, res.get("msg")
    return res["databases"][0]


def _flip_key(src, dst, index, column_sql, table):
    """Copy `src` to `dst` with the case bit of one character flipped inside one key of `index`
    (in its leaf page: the table's own copy of the value stays right)."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % src, uri=True)
    try:
        psize = con.execute("PRAGMA page_size").fetchone()[0]
        leaves = [r[0] for r in con.execute("SELECT pageno FROM dbstat WHERE name=? AND pagetype='leaf' "
                                            "ORDER BY pageno", (index,))]
        rows = con.execute("SELECT %s, rowid FROM %s NOT INDEXED WHERE %s IS NOT NULL ORDER BY rowid"
                           % (column_sql, table, column_sql)).fetchall()
    finally:
        con.close()
    data = bytearray(open(src, "rb").read())
    for value, _rowid in rows:
        raw = value.encode()
        pos = next((i for i, ch in enumerate(value) if ch.isalpha()), None)
        if pos is None:
            continue
        hits = [p for p in leaves if data.find(raw, (p - 1) * psize, p * psize) >= 0]
        if len(hits) != 1 or data.count(raw) < 2:       # one entry in the index, the row's own copy elsewhere
            continue
        at = data.find(raw, (hits[0] - 1) * psize, hits[0] * psize)
        data[at + pos] ^= 0x20
        open(dst, "wb").write(bytes(data))
        return
    raise AssertionError("no key of %s found once in its leaves" % index)


def _integrity(path):
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % path, uri=True)
    try:
        return [r[0] for r in con.execute("PRAGMA integrity_check")]
    finally:
        con.close()


@pytest.mark.parametrize("index,column,table", [
    ("idx_messages_session", "session_id", "messages"),               # a full index of the biggest table
    ("idx_sessions_title_unique", "title", "sessions"),               # a partial unique index
])
def test_flipped_key_named_by_index_and_row(standard_src, tmp_path, index, column, table):
    db = tmp_path / "state.db"
    _flip_key(standard_src, db, index, column, table)
    missing = [int(line.split()[1]) for line in _integrity(db) if line.endswith("missing from index " + index)]
    assert missing                                 # SQLite's own oracle (its lookups, lost past a key out of order)
    rec = _audit(db)
    assert rec["verdict"] == "index_damage", rec["reasons"]
    i = rec["honesty"][table]["indexes"][index]
    assert i["entries"] == i["expected"]              # the counts agree: only the keys tell
    assert (i["lacks"], i["excess"]) == (1, 1)
    assert i["lacks_rows"] == i["excess_rows"] and i["lacks_rows"][0] in missing   # the one entry that changed
    rowid = i["lacks_rows"][0]
    reason = [r for r in rec["reasons"] if r.startswith(index + ":")]
    assert reason and "rowid %d" % rowid in reason[0] and "disagree" in reason[0], rec["reasons"]
    assert rec["errors_by_object"] == {index: 2}


def test_unreadable_index_is_damage_not_silence(standard_src, tmp_path):
    """An index whose leaf cannot be read through it is a finding, never an unchecked index."""
    db = tmp_path / "state.db"
    shutil.copyfile(standard_src, db)
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % db, uri=True)
    psize = con.execute("PRAGMA page_size").fetchone()[0]
    leaf = con.execute("SELECT pageno FROM dbstat WHERE name='idx_messages_session' AND pagetype='leaf' "
                       "ORDER BY pageno LIMIT 1 OFFSET 3").fetchone()[0]
    con.close()
    with open(db, "r+b") as f:                      # the cell count of the leaf: cells past the page end
        f.seek((leaf - 1) * psize + 3)
        f.write(b"\x7f\xff")
    rec = _audit(db)
    assert rec["verdict"] in ("index_damage", "structural_corruption"), rec["reasons"]
    assert any(r.startswith("idx_messages_session") for r in rec["reasons"]), rec["reasons"]
