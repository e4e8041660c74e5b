"""A flipped bit in message text breaks no b-tree and no checksum (quick_check and integrity_check
pass on 3.40): the default audit checks each FTS table's copy of the text against what its
insert trigger would write from messages, and names the row."""
from __future__ import annotations

import shutil
import sqlite3

import pytest

from fleetops.remote.hermes import audit as hermes_audit


def _flip_text(src, dst, table, column, id_col):
    """Copy with the case bit of one letter flipped in `table`'s own copy of one row's text (in one
    of its leaf pages: the other copy of the text stays right); the row's id."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % src, uri=True)
    try:
        psize = con.execute("PRAGMA page_size").fetchone()[0]
        leaves = [r[0] for r in con.execute("SELECT pageno FROM dbstat WHERE name=? AND pagetype='leaf'", (table,))]
        rows = con.execute("SELECT %s, %s FROM %s NOT INDEXED WHERE length(%s) BETWEEN 40 AND 400 ORDER BY 1"
                           % (id_col, column, table, column)).fetchall()
    finally:
        con.close()
    data = bytearray(open(src, "rb").read())
    for rid, text in rows:
        raw = text.encode()[:40]
        pos = next((i for i in range(20, 40) if chr(raw[i]).isalpha()), None)
        hits = [data.find(raw, (p - 1) * psize, p * psize) for p in leaves]
        hits = [h for h in hits if h >= 0]
        if pos is None or len(hits) != 1:
            continue
        data[hits[0] + pos] ^= 0x20
        open(dst, "wb").write(bytes(data))
        return rid
    raise AssertionError("no text of %s.%s found" % (table, column))


def _check(path, pragma):
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % path, uri=True)
    try:
        return con.execute("PRAGMA %s" % pragma).fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("table,column,id_col", [
    ("messages", "content", "id"),                   # the message itself
    ("messages_fts_content", "c0", "id"),            # the FTS table's copy of it
])
def test_flipped_text_is_seen_and_named(standard_src, tmp_path, table, column, id_col):
    db = tmp_path / "state.db"
    rid = _flip_text(standard_src, db, table, column, id_col)
    assert _check(db, "integrity_check") == [("ok",)]        # SQLite 3.40's checks see nothing
    rec = hermes_audit.main({"db_path": str(db), "tooling": False, "holders": False})["databases"][0]
    assert rec["verdict"] == "fts_index_damage", rec["reasons"]
    named = [r for r in rec["reasons"] if "copy of the text differs from messages" in r]
    assert named and "rowids %d" % rid in named[0], rec["reasons"]
