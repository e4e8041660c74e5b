"""The central results store: schema, round trip, two writer processes, secrets, a killed controller."""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sqlite3
import stat
import time

import pytest

from fleetops.engine.recap import result_status
from fleetops.engine.results import BATCH_SECONDS, ResultsStore, integrity_ok, new_run_id, pid_alive
from fleetops.engine.results_schema import SCHEMA_VERSION

SECRET = "s3cr3t-Hunter2-value"


def feed(sink, run_id, hosts=("web1", "web2", "db1"), tasks=3, secret=None, end=True):
    """A fake run: one play, `tasks` tasks; web1 changes on task 0, db1 fails the last task."""
    sink.run_start(run_id, "playbooks/site.yml", "inventories/lab.yml",
                   {"forks": 5, "check": False, "extra_vars": {"db_password": secret or "pw", "region": "eu"}})
    sink.play_start(0, "configure", list(hosts))
    sink.batch_start(0, 0, list(hosts))
    for h in hosts:
        sink.host_facts(h, {"arch": "x86_64", "hostname": h})
    for t in range(tasks):
        sink.task_start(0, t, f"task {t}", "command", list(hosts))
        for h in hosts:
            sink.host_task_start(h, f"task {t}")
            res = {"changed": False, "failed": False, "skipped": False, "msg": "", "rc": 0, "duration": 0.5}
            if h == "web1" and t == 0:
                res["changed"] = True
            if h == "db1" and t == tasks - 1:
                res.update(failed=True, rc=1, msg=f"command failed: token {secret}" if secret else "boom")
            if secret:
                res["stdout"] = f"line with {secret} inside"
                res["nested"] = [{"deep": secret}]
                res["api_token"] = "unlisted-token-value"
            sink.host_result(h, 0, t, f"task {t}", "command", res, 100.0 + t, 100.5 + t)
    sink.play_end(0, None)
    if end:
        stats = {h: {"ok": tasks - (1 if h == "db1" else 0), "changed": 1 if h == "web1" else 0,
                     "failed": 1 if h == "db1" else 0, "unreachable": 0, "skipped": 0, "rescued": 0,
                     "ignored": 0} for h in hosts}
        sink.run_end("failed", stats, 2)


def test_schema_and_wal(tmp_path):
    store = ResultsStore(tmp_path / "r")
    store.close()
    conn = sqlite3.connect(tmp_path / "r" / "runs.db")
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"schema_version", "runs", "run_hosts", "task_results", "plays", "batches"} <= tables
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cols = {r[1] for r in conn.execute("PRAGMA table_info(task_results)")}
    assert {"run_id", "host", "play_index", "task_index", "task_name", "module", "status", "msg",
            "started", "ended", "duration", "result"} <= cols
    # Opening again is idempotent: still one schema_version row.
    ResultsStore(tmp_path / "r").close()
    assert conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 1


def test_run_id_format():
    import re
    a, b = new_run_id(), new_run_id()
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", a)
    assert a != b


def test_round_trip(tmp_path):
    store = ResultsStore(tmp_path)
    rid = new_run_id()
    feed(store, rid)
    run = store.get_run("latest")
    assert run["id"] == rid and run["status"] == "failed" and run["exit_code"] == 2
    assert run["status_note"] is None and run["ended"] >= run["started"]
    assert run["playbook"] == "playbooks/site.yml"
    assert run["options"]["forks"] == 5
    hosts = {h["host"]: h for h in run["hosts"]}
    assert set(hosts) == {"web1", "web2", "db1"}
    assert (hosts["web1"]["ok"], hosts["web1"]["changed"], hosts["web1"]["failed"]) == (3, 1, 0)
    assert (hosts["db1"]["ok"], hosts["db1"]["failed"]) == (2, 1)
    assert hosts["web2"]["facts"] == {"arch": "x86_64", "hostname": "web2"}
    assert len(run["tasks"]) == 9
    failed = [t for t in run["tasks"] if t["status"] == "failed"]
    assert [(t["host"], t["task_index"], t["msg"]) for t in failed] == [("db1", 2, "boom")]
    assert failed[0]["result"]["rc"] == 1 and failed[0]["duration"] == 0.5
    assert [t["status"] for t in run["tasks"] if t["host"] == "web1"] == ["changed", "ok", "ok"]
    assert run["plays"][0]["name"] == "configure" and run["plays"][0]["batches"] == [["web1", "web2", "db1"]]
    assert store.get_run(rid[:12])["id"] == rid          # unique prefix
    assert store.get_run("nope") is None
    assert [r["id"] for r in store.list_runs(5)] == [rid]


def test_incremental_counters_without_run_end(tmp_path):
    """A run that never reached run_end still has a recap built from its results."""
    store = ResultsStore(tmp_path)
    feed(store, "r1", end=False)
    hosts = {h["host"]: h for h in store.get_run("r1")["hosts"]}
    assert (hosts["web1"]["ok"], hosts["web1"]["changed"]) == (3, 1)
    assert (hosts["db1"]["ok"], hosts["db1"]["failed"]) == (2, 1)
    # This process is alive, so the run is still "running", not "interrupted".
    run = store.get_run("r1")
    assert run["status"] == "running" and run["status_note"] is None


def test_result_status_order():
    assert result_status({"failed": True, "unreachable": True}) == "unreachable"
    assert result_status({"failed": True, "ignored": True}) == "ignored"
    assert result_status({"failed": True, "rescued": True}) == "rescued"
    assert result_status({"failed": True, "changed": True}) == "failed"
    assert result_status({"skipped": True}) == "skipped"
    assert result_status({"changed": True}) == "changed"
    assert result_status({}) == "ok"


def test_secrets_masked_and_scrubbed(tmp_path):
    store = ResultsStore(tmp_path, secret_values={SECRET})
    feed(store, "r1", secret=SECRET)
    store.close()
    raw = b""
    for name in os.listdir(tmp_path):
        if name.startswith("runs.db"):
            raw += (tmp_path / name).read_bytes()
    assert SECRET.encode() not in raw
    assert b"unlisted-token-value" not in raw          # masked by its name alone
    run = ResultsStore(tmp_path).get_run("r1")
    failed = [t for t in run["tasks"] if t["status"] == "failed"][0]
    assert "command failed: token" in failed["msg"] and SECRET not in failed["msg"]
    assert SECRET not in failed["result"]["stdout"] and failed["result"]["stdout"].startswith("line with ")
    assert SECRET not in str(failed["result"]["nested"])
    assert run["options"]["extra_vars"]["db_password"] != SECRET
    assert run["options"]["extra_vars"]["region"] == "eu"


def test_host_dir(tmp_path):
    store = ResultsStore(tmp_path)
    d = store.host_dir("r1", "web1")
    assert d == str(tmp_path / "r1" / "web1")
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    evil = store.host_dir("r1", "../../etc")
    assert os.path.realpath(evil).startswith(str(tmp_path / "r1") + os.sep)


def test_extra_table_and_connect(tmp_path):
    store = ResultsStore(tmp_path)
    store.extra_table("CREATE TABLE IF NOT EXISTS audit_db (run_id TEXT, host TEXT, verdict TEXT);"
                      "CREATE INDEX IF NOT EXISTS audit_db_run ON audit_db(run_id)")
    store.extra_table("CREATE TABLE IF NOT EXISTS audit_db (run_id TEXT, host TEXT, verdict TEXT)")
    with store.connect() as c:
        c.execute("INSERT INTO audit_db VALUES ('r1', 'web1', 'healthy')")
    with pytest.raises(RuntimeError):
        with store.connect() as c:
            c.execute("INSERT INTO audit_db VALUES ('r1', 'web2', 'rolled-back')")
            raise RuntimeError("boom")
    with store.connect() as c:
        assert [tuple(r) for r in c.execute("SELECT host, verdict FROM audit_db")] == [("web1", "healthy")]


def _writer(results_dir, run_id, n_tasks, go):
    go.wait(30)
    store = ResultsStore(results_dir)
    hosts = [f"h{i:02d}" for i in range(10)]
    feed(store, run_id, hosts=hosts, tasks=n_tasks)
    store.close()
    os._exit(1 if store.write_error else 0)


def at_once(target, argss) -> list:
    """Run target(*args, go) in one forked process per args, released together; their exit codes."""
    ctx = mp.get_context("fork")
    go = ctx.Event()
    procs = [ctx.Process(target=target, args=(*args, go)) for args in argss]
    for p in procs:
        p.start()
    go.set()
    for p in procs:
        p.join(120)
    return [p.exitcode for p in procs]


def test_two_processes_write_at_once(tmp_path):
    assert at_once(_writer, [(str(tmp_path), f"run-{i}", 30) for i in range(2)]) == [0, 0]
    assert integrity_ok(tmp_path / "runs.db")
    store = ResultsStore(tmp_path)
    for i in range(2):
        run = store.get_run(f"run-{i}")
        assert run["status"] == "failed" and run["exit_code"] == 2
        assert len(run["tasks"]) == 300
        assert len(run["hosts"]) == 10
        assert {(t["host"], t["task_index"]) for t in run["tasks"]} == \
            {(f"h{h:02d}", t) for h in range(10) for t in range(30)}


def _doomed_writer(results_dir, ready):
    store = ResultsStore(results_dir)
    store.run_start("doomed", "pb.yml", "inv.yml", {})
    store.play_start(0, "p", ["a", "b"])
    i = 0
    while True:
        store.host_result("a" if i % 2 else "b", 0, i, f"t{i}", "command",
                          {"changed": False, "failed": False, "msg": "x" * 200}, 1.0, 2.0)
        i += 1
        if i == 20:
            ready.set()


def test_sigkilled_writer_shows_interrupted(tmp_path):
    ctx = mp.get_context("fork")
    ready = ctx.Event()
    p = ctx.Process(target=_doomed_writer, args=(str(tmp_path), ready))
    p.start()
    assert ready.wait(60)
    time.sleep(3 * BATCH_SECONDS)          # a result is in the store within BATCH_SECONDS of arriving
    os.kill(p.pid, signal.SIGKILL)
    p.join(30)
    assert p.exitcode == -signal.SIGKILL
    assert not pid_alive(p.pid, None)
    assert integrity_ok(tmp_path / "runs.db")
    store = ResultsStore(tmp_path)
    run = store.get_run("doomed")
    assert run["recorded_status"] == "running"
    assert run["status"] == "interrupted" and run["status_note"] == "no end recorded"
    assert len(run["tasks"]) >= 20
    # A re-run proceeds in the same store.
    feed(store, "after")
    assert store.get_run("latest")["id"] == "after"
    assert store.list_runs(5)[1]["status"] == "interrupted"


def test_mark_interrupted(tmp_path):
    store = ResultsStore(tmp_path)
    feed(store, "r1", end=False)
    store.mark_interrupted("r1")
    run = store.get_run("r1")
    assert (run["status"], run["exit_code"], run["status_note"]) == ("interrupted", 130, None)
    assert run["ended"] is not None


def test_report_only_store_requires_existing_db(tmp_path):
    with pytest.raises(FileNotFoundError):
        ResultsStore(tmp_path / "missing", create=False)
    assert not (tmp_path / "missing").exists()
