"""hermes_verify on a good store (through Hermes' own `hermes sessions stats`) and on broken ones."""
from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

from fleetops.remote import hermes_verify
from tests.corpus import build, damage

from .conftest import HERMES, args_for, hermes_env, start_gateway


def counts(db):
    c = sqlite3.connect(str(db))
    try:
        return {t: c.execute("SELECT count(*) FROM %s NOT INDEXED" % t).fetchone()[0]
                for t in ("sessions", "messages")}
    finally:
        c.close()


def offline_env(root):
    env = hermes_env(root)
    return {k: env[k] for k in build.HERMES_ENV}


def test_good_store_under_a_live_gateway_verifies(home, procs):
    db = home / "state.db"
    want = counts(db)
    start_gateway(procs, home)
    r = hermes_verify.main(args_for(home, expect_counts=want, hermes_bin=str(HERMES),
                                    hermes_env=offline_env(home)))
    assert not r["failed"], r["msg"]
    ch = r["checks"]
    assert ch["write_probe"]["ok"] and ch["quick_check"]["ok"]
    assert {t: v["got"] for t, v in ch["counts"].items()} == want
    assert set(ch["fts"]) == {"messages_fts", "messages_fts_trigram"} and all(v["ok"] for v in ch["fts"].values())
    assert ch["hermes_sessions_stats"]["ok"] and ch["hermes_sessions_stats"]["rc"] == 0
    c = sqlite3.connect(str(db))
    assert c.execute("SELECT count(*) FROM state_meta WHERE key = ?", (hermes_verify.PROBE_KEY,)).fetchone()[0] == 0
    c.close()


def test_count_mismatch_fails(home):
    want = counts(home / "state.db")
    want["messages"] += 1
    r = hermes_verify.main(args_for(home, expect_counts=want, hermes_stats=False))
    assert r["failed"] and "messages" in r["msg"] and "the repair report says" in r["msg"]


def test_structurally_damaged_store_fails(tmp_path, std_image):
    d = damage.make("interior_page_zeroed", std_image, tmp_path / "h" / "state.db")
    r = hermes_verify.main(args_for(tmp_path / "h", hermes_stats=False))
    assert r["failed"] and "quick_check" in r["msg"], r["msg"]
    assert not r["checks"]["quick_check"]["ok"]


def test_fts_damage_fails_the_match_or_quick_check(tmp_path, std_image):
    damage.make("fts_pages_overwritten", std_image, tmp_path / "h" / "state.db")
    r = hermes_verify.main(args_for(tmp_path / "h", hermes_stats=False))
    assert r["failed"], r["msg"]


def test_fts_tables_without_triggers_fail(home):
    c = sqlite3.connect(str(home / "state.db"))
    for (name,) in c.execute("SELECT name FROM sqlite_master WHERE type='trigger' AND name LIKE 'messages_fts%'").fetchall():
        c.execute('DROP TRIGGER "%s"' % name)
    c.commit()
    c.close()
    r = hermes_verify.main(args_for(home, hermes_stats=False))
    assert r["failed"] and "no sync triggers" in r["msg"]


def test_unwritable_store_fails_the_write_probe(home):
    c = sqlite3.connect(str(home / "state.db"))
    c.execute("DROP TABLE state_meta")
    c.commit()
    c.close()
    r = hermes_verify.main(args_for(home, hermes_stats=False))
    assert r["failed"] and "write probe" in r["msg"]


def test_missing_store_fails(tmp_path):
    r = hermes_verify.main(args_for(tmp_path, hermes_stats=False))
    assert r["failed"] and "no such file" in r["msg"]
