"""hermes_verify on a good store (through Hermes' own `hermes sessions stats`) and on broken ones."""
from __future__ import annotations

import sqlite3

import pytest

from fleetops.remote.hermes import verify as hermes_verify
from tests.support import hermes_matrix
from tests.corpus import build, damage

from tests.support.hermes_procs import HERMES, args_for, hermes_env, start_gateway


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


@pytest.mark.parametrize("version", hermes_matrix.ALL)
def test_each_version_reads_its_store_with_its_own_hermes(version, tmp_path, procs):
    """A store written by that version's SessionDB under that version's own gateway: its
    `sessions stats` and a search through its own SessionDB find the probe message."""
    v = hermes_matrix.get(version)
    try:
        build.venv_python(version)
    except build.HermesVenvMissing as exc:
        pytest.skip(str(exc))
    root = tmp_path / "hermes"
    root.mkdir(mode=0o700)
    build.standard_db(root / "state.db", hermes=version)
    want = counts(root / "state.db")
    cmd = v.venv / "bin" / v.command
    start_gateway(procs, root, hermes=cmd)
    r = hermes_verify.main(args_for(root, expect_counts=want, hermes_bin=str(cmd),
                                    hermes_env=offline_env(root)))
    assert not r["failed"], r["msg"]
    ch = r["checks"]
    assert ch["hermes_sessions_stats"]["ok"] and ch["hermes_sessions_stats"]["numbers"] == want
    s = ch["hermes_search"]
    assert s["ok"] and s["hits"] >= 1 and s["python"] == str(v.venv / "bin" / "python")
    assert "its own SessionDB search finds message %d" % s["rowid"] in r["msg"]


def test_hermes_found_from_the_gateway_that_holds_the_store(home, procs):
    """No hermes_bin and none on PATH: the Hermes the live gateway runs is the one used."""
    start_gateway(procs, home)
    r = hermes_verify.main(args_for(home, hermes_env=offline_env(home)))
    assert not r["failed"], r["msg"]
    assert r["checks"]["hermes"]["found_by"].startswith("the command line of holder PID")
    assert r["checks"]["hermes_search"]["ok"] and r["checks"]["hermes_sessions_stats"]["ok"]


def test_no_hermes_found_is_said(home, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    r = hermes_verify.main(args_for(home))
    assert not r["failed"]
    assert r["checks"]["hermes_sessions_stats"]["ok"] is None
    assert "no Hermes found" in r["checks"]["hermes_sessions_stats"]["note"]


def test_count_mismatch_fails(home):
    want = counts(home / "state.db")
    want["messages"] += 1
    r = hermes_verify.main(args_for(home, expect_counts=want, hermes_stats=False))
    assert r["failed"] and "messages" in r["msg"] and "the repair report says" in r["msg"]


def test_structurally_damaged_store_fails(tmp_path, std_image):
    damage.make("interior_page_zeroed", std_image, tmp_path / "h" / "state.db")
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
