"""The results store on a real PostgreSQL server, side by side with SQLite: the same runs read
back the same, schema versions migrate on both, two writers at once, a SIGKILLed controller,
and the URL's password nowhere."""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import time

import psycopg
import pytest

from fleetops.engine.results import BATCH_SECONDS, ResultsStore
from fleetops.engine.results_schema import SCHEMA, SCHEMA_VERSION
from fleetops.engine.results_backend import PgConnection, redact
from tests.unit.engine.test_results import SECRET, at_once, feed

from tests.support.postgres import PASSWORD


def _comparable(run: dict) -> dict:
    """A run as read back, minus what differs by backend or by moment (times, ids, where)."""
    drop = {"started", "ended", "duration", "first_seen", "last_seen", "controller_pid", "controller_pid_start",
            "results_dir", "db_path", "open_store", "id", "run_id"}

    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k not in drop}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj
    return strip(run)


def _everything(url: str) -> str:
    """Every value of every table of the database, as text (to look for a leaked secret)."""
    out = []
    with psycopg.connect(url) as c:
        tables = [r[0] for r in c.execute("SELECT table_name FROM information_schema.tables"
                                          " WHERE table_schema = current_schema() AND table_type='BASE TABLE'")]
        for t in tables:
            out += [repr(r) for r in c.execute(f"SELECT * FROM {t}")]
    return "\n".join(out)


def test_the_same_run_reads_back_the_same_from_both_backends(pg_url, tmp_path):
    lite = ResultsStore(tmp_path / "lite", secret_values={SECRET})
    pg = ResultsStore(tmp_path / "files", secret_values={SECRET}, db_url=pg_url)
    for store in (lite, pg):
        feed(store, "r1", secret=SECRET)
        feed(store, "r2")
    a, b = lite.get_run("r1"), pg.get_run("r1")
    assert _comparable(a) == _comparable(b)
    assert a["started"] == pytest.approx(b["started"], abs=5) and isinstance(b["started"], float)
    assert [r["id"] for r in lite.list_runs(5)] == [r["id"] for r in pg.list_runs(5)] == ["r2", "r1"]
    assert pg.resolve_run_id("r") is None and pg.resolve_run_id("r2") == "r2"
    assert str(pg.db_path) == redact(pg_url) and PASSWORD not in str(pg.db_path)
    text = _everything(pg_url)
    assert SECRET not in text and "r1" in text
    for s in (lite, pg):
        s.close()


def _v1_sqlite(path):
    conn = sqlite3.connect(path)
    for stmt in SCHEMA.split(";"):
        if stmt.strip() and "runs_started" not in stmt:
            conn.execute(stmt)
    conn.execute("INSERT INTO schema_version VALUES (1)")
    conn.commit()
    conn.close()


def test_a_version_1_store_is_migrated_on_both(pg_url, tmp_path):
    (tmp_path / "lite").mkdir()
    _v1_sqlite(tmp_path / "lite" / "runs.db")
    c = PgConnection(pg_url)
    c.execute("BEGIN")
    c.prepare_schema()
    for stmt in SCHEMA.split(";"):
        if stmt.strip() and "runs_started" not in stmt:
            c.execute(stmt)
    c.execute("INSERT INTO schema_version VALUES (1)")
    c.execute("COMMIT")
    c.close()
    for store in (ResultsStore(tmp_path / "lite"), ResultsStore(tmp_path / "files", db_url=pg_url)):
        with store.connect() as conn:
            assert [tuple(r) for r in conn.execute("SELECT version FROM schema_version")] == [(SCHEMA_VERSION,)]
            assert conn.execute("SELECT 1 FROM sqlite_master WHERE type='index' AND name='runs_started'").fetchone()
        store.close()
    newer = ResultsStore(tmp_path / "files", db_url=pg_url)
    with newer.connect() as conn:
        conn.execute("UPDATE schema_version SET version=?", (SCHEMA_VERSION + 1,))
    newer.close()
    with pytest.raises(OSError, match="newer than this fleetops"):
        ResultsStore(tmp_path / "files", db_url=pg_url)


def _writer(url, files, run_id, go):
    go.wait(30)
    store = ResultsStore(files, db_url=url)
    feed(store, run_id, hosts=[f"h{i:02d}" for i in range(10)], tasks=30)
    store.close()
    os._exit(1 if store.write_error else 0)


def test_two_controllers_write_at_once(pg_url, tmp_path):
    assert at_once(_writer, [(pg_url, str(tmp_path / f"c{i}"), f"run-{i}") for i in range(2)]) == [0, 0]
    store = ResultsStore(tmp_path / "reader", db_url=pg_url)
    for i in range(2):
        run = store.get_run(f"run-{i}")
        assert (run["status"], run["exit_code"], len(run["tasks"]), len(run["hosts"])) == ("failed", 2, 300, 10)
        assert {h["host"]: h["ok"] for h in run["hosts"]} == {f"h{j:02d}": 30 for j in range(10)}


def _doomed(url, files, ready):
    store = ResultsStore(files, db_url=url)
    store.run_start("doomed", "pb.yml", "inv.yml", {})
    store.play_start(0, "p", ["a", "b"])
    i = 0
    while True:
        store.host_result("ab"[i % 2], 0, i, f"t{i}", "command", {"changed": False, "msg": "x"}, 1.0, 2.0)
        i += 1
        if i == 20:
            ready.set()
        time.sleep(0.001)


def test_a_sigkilled_controller_shows_interrupted(pg_url, tmp_path):
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=_doomed, args=(pg_url, str(tmp_path / "f"), ready))
    p.start()
    assert ready.wait(60)
    time.sleep(3 * BATCH_SECONDS)
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    store = ResultsStore(tmp_path / "f", db_url=pg_url)
    run = store.get_run("doomed")
    assert run["recorded_status"] == "running"
    assert run["status"] == "interrupted" and run["status_note"] == "no end recorded"
    assert len(run["tasks"]) >= 20
    feed(store, "after")
    assert [r["status"] for r in store.list_runs(5)] == ["failed", "interrupted"]


def test_a_wrong_password_is_one_line_without_it(postgres, tmp_path):
    url = postgres.new_db().replace(PASSWORD, "not-the-" + PASSWORD)
    with pytest.raises(OSError) as exc:
        ResultsStore(tmp_path, db_url=url)
    assert "not-the-" not in str(exc.value) and PASSWORD not in str(exc.value)
    assert "password authentication failed" in str(exc.value) and redact(url) in str(exc.value)
