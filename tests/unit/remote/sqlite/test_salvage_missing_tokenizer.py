"""Issue 7: a host whose SQLite lacks a tokenizer the source uses (trigram before 3.34).

The source's schema is edited (writable_schema) so messages_fts_trigram asks for a tokenizer
no SQLite has: exactly what an old host sees for 'trigram'. Salvage must say so, leave that
table (and its triggers) out whole, keep the other FTS table, lose no row, and fail the
salvage (fts=rebuild was asked): leaving FTS to Hermes is the operator's choice.
"""
import sqlite3

from fleetops.remote.sqlite.salvage import salvage

from tests.support.hermeslike import build


def test_missing_tokenizer_fails_rebuild_and_names_the_choice(tmp_path):
    src = tmp_path / "state.db"
    build(src, sessions=6, msgs=(3, 6))
    with sqlite3.connect(src) as c:
        truth = {t: sorted(c.execute(f"SELECT * FROM {t}").fetchall()) for t in ("sessions", "messages")}
    con = sqlite3.connect(src)
    con.execute("PRAGMA writable_schema=ON")
    con.execute("UPDATE sqlite_master SET sql=replace(sql, 'trigram', 'fleetops_no_such_tokenizer') "
                "WHERE name='messages_fts_trigram'")
    con.commit()
    con.close()

    out = tmp_path / "out.db"
    rep = salvage(str(src), str(out))

    tri = rep["fts"]["messages_fts_trigram"] if "fts" in rep else rep["fts_report"]["messages_fts_trigram"]
    assert tri["mode"] == "leave-to-hermes" and not tri["created"]
    assert "no such tokenizer" in tri["reason"]
    plain = (rep.get("fts") or rep.get("fts_report"))["messages_fts"]
    assert plain["created"]
    o = sqlite3.connect(out)
    names = {r[0] for r in o.execute("SELECT name FROM sqlite_master")}
    assert "messages_fts_trigram" not in names
    assert not [n for n in names if n.startswith("messages_fts_trigram_")]      # no orphan triggers/shadows
    assert {"messages_fts_insert", "messages_fts_delete", "messages_fts_update"} <= names
    word = o.execute("SELECT content FROM messages WHERE content <> '' ORDER BY id LIMIT 1").fetchone()[0].split()[0]
    word = "".join(ch for ch in word if ch.isalnum())
    assert o.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (word,)).fetchone()[0] > 0
    for table in ("sessions", "messages"):
        assert sorted(o.execute(f"SELECT * FROM {table}").fetchall()) == truth[table]
    assert rep["verdict"] == "failed"
    assert any("messages_fts_trigram not rebuilt" in r and "fts=leave-to-hermes" in r
               for r in rep["verdict_reasons"])
    chosen = salvage(str(src), str(tmp_path / "chosen.db"), fts="leave-to-hermes")
    assert chosen["verdict"] == "complete"
