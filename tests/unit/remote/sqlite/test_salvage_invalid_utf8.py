"""A bad byte never drops a row, let alone its children: text that is not valid UTF-8 is kept
as the bytes SQLite stores, as TEXT, and named in the report."""
import sqlite3

from tests.unit.remote.sqlite.test_salvage_corpus import out_rows


def test_invalid_text_kept_as_stored_with_children(salvaged):
    r = salvaged("invalid_utf8_in_rows")
    rep = r.rep
    altered = r.d.extra["altered"]
    assert {t for t, *_ in altered} == {"sessions", "messages"}
    c = sqlite3.connect(r.out)
    for table, rid, col, stored in altered:  # one column each here
        typ, raw = c.execute('SELECT typeof("%s"), CAST("%s" AS BLOB) FROM "%s" WHERE rowid = ?'
                             % (col, col, table), (rid,)).fetchone()
        assert (typ, raw) == ("text", stored)
        assert rep["tables"][table]["invalid_utf8_rows"] == [rid]
        assert rep["tables"][table]["quarantined"] == 0
    # the session with the damaged model keeps every message
    (sid,) = c.execute("SELECT id FROM sessions WHERE rowid = ?",
                       ([rid for t, rid, *_ in altered if t == "sessions"][0],)).fetchone()
    c.close()
    src = sqlite3.connect("file:%s?mode=ro" % r.d.truth_path, uri=True)
    want = src.execute("SELECT count(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
    src.close()
    msgs = out_rows(r.out, "messages")
    assert want > 0 and sum(1 for v in msgs.values() if v[1] == sid) == want
    # damaged content is not a complete salvage, and says why
    assert rep["verdict"] == "partial" and rep["loss_rows"] == 0
    assert any("not valid UTF-8" in x for x in rep["tables"]["sessions"]["verdict_reasons"])
