"""Holder scan: real processes holding a state.db are found by (dev, inode) and classified."""
from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from fleetops.remote.hermes import audit as hermes_audit
from fleetops.remote.hermes import holders as hermes_holders
from tests.corpus import build
from tests.support.paths import REPO

VENV = "/opt/fleetops-test/hermes-venv"
HOLD = ("import sqlite3, sys, time\n"
        "c = sqlite3.connect(sys.argv[1]); c.execute('SELECT count(*) FROM sqlite_master').fetchone()\n"
        "print('ready', flush=True); time.sleep(300)\n")


def _wait_holder(db, kind, pid=None, timeout=90):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        res = hermes_holders.scan(str(db))
        for h in res["holders"]:
            if h["kind"] == kind and (pid is None or h["pid"] == pid):
                return res, h
        time.sleep(0.5)
    raise AssertionError(f"no {kind} holder of {db} appeared: {hermes_holders.scan(str(db))}")


def _stop(p):
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


@pytest.mark.parametrize("argv,kind", [
    (["/opt/venv/bin/python", "/opt/venv/bin/hermes", "gateway", "run"], "gateway"),
    (["python3", "-m", "hermes_cli.main", "--profile", "work", "gateway", "run"], "gateway"),
    (["hermes", "-p", "work", "gateway", "stop"], "cli"),
    (["hermes", "dashboard", "--port", "9119"], "dashboard"),
    (["hermes serve --isolated"], "desktop-serve"),
    (["hermes", "serve", "--isolated", "--profile", "x"], "desktop-serve"),
    (["python3", "-m", "tui_gateway.entry"], "tui"),
    (["/usr/local/bin/hermes"], "tui"),
    (["hermes", "sessions", "stats"], "cli"),
    (["sqlite3", "/home/u/.hermes/state.db"], "sqlite-shell"),
    (["python3", "backup.py"], "unknown"),
    ([], "unknown"),
])
def test_classify(argv, kind):
    assert hermes_holders.classify(argv) == kind


def test_real_gateway_found_and_classified(standard_src, tmp_path):
    home = tmp_path / "home"
    build.copy_image(standard_src, home / "state.db")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(build.HERMES_ENV, HERMES_HOME=str(home))
    p = subprocess.Popen([f"{VENV}/bin/hermes", "gateway", "run"], env=env, cwd=str(tmp_path),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        res, h = _wait_holder(home / "state.db", "gateway")
        assert h["user"] == "root" and h["ppid"] == os.getpid()
        assert h["fds"].get("db", 0) >= 1
        # the full audit reports it too, and still judges the file (a gateway is no proof of health)
        rec = hermes_audit.main({"db_path": str(home / "state.db"), "tooling": False})["databases"][0]
        assert any(x["kind"] == "gateway" for x in rec["holders"]["holders"])
        assert rec["verdict"] == "healthy"
    finally:
        _stop(p)


def test_desktop_serve_and_sqlite_shell(standard_src, tmp_path):
    db = tmp_path / "state.db"
    build.copy_image(standard_src, db)
    serve = subprocess.Popen(["bash", "-c", 'exec -a "hermes serve --isolated" "$0" -c "$1" "$2"',
                              sys.executable, HOLD, str(db)], stdout=subprocess.PIPE, start_new_session=True)
    shell = subprocess.Popen(["sqlite3", str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             start_new_session=True)
    try:
        assert serve.stdout.readline().strip() == b"ready"
        shell.stdin.write(b"SELECT count(*) FROM sessions;\n")
        shell.stdin.flush()
        assert shell.stdout.readline().strip().isdigit()
        _, h = _wait_holder(db, "desktop-serve", pid=serve.pid, timeout=10)
        assert h["cmdline"][0] == "hermes serve --isolated"
        _, h2 = _wait_holder(db, "sqlite-shell", pid=shell.pid, timeout=10)
        assert h2["fds"]["db"] >= 1
    finally:
        _stop(serve)
        shell.stdin.close()
        _stop(shell)


def test_deleted_wal_generation_held(standard_src, tmp_path):
    """A writer keeps the old -wal open after it was replaced: retired generation, verdict retired_wal."""
    db = tmp_path / "state.db"
    build.copy_image(standard_src, db)
    code = ("import sqlite3, sys, time\n"
            "c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA wal_autocheckpoint=0')\n"
            "c.execute(\"INSERT INTO state_meta(key, value) VALUES ('fleetops-test', 'x')\"); c.commit()\n"
            "print('ready', flush=True); time.sleep(300)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert p.stdout.readline().strip() == b"ready"
        wal = str(db) + "-wal"
        assert os.path.getsize(wal) > 0
        shutil.copyfile(wal, wal + ".new")   # a new inode at the path, the old one unlinked but held
        os.replace(wal + ".new", wal)
        res = hermes_holders.scan(str(db))
        [h] = [h for h in res["holders"] if h["pid"] == p.pid]
        assert res["retired"] is True
        assert [r["role"] for r in h["retired"]] == ["wal"]
        assert h["retired"][0]["target"].endswith("state.db-wal (deleted)")
        rec = hermes_audit.main({"db_path": str(db), "tooling": False})["databases"][0]
        assert rec["verdict"] == "retired_wal"
    finally:
        _stop(p)


def test_holders_unknown_when_processes_cannot_be_inspected(tmp_path):
    """As an unprivileged user, root's fd tables are unreadable: the answer is unknown, never none."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop to nobody")
    db = tmp_path / "state.db"
    sqlite3.connect(db).close()
    os.chmod(tmp_path, 0o755)
    code = ("import json, sys; sys.path.insert(0, sys.argv[2]); from fleetops.remote.hermes import holders as hermes_holders;"
            "print(json.dumps(hermes_holders.scan(sys.argv[1])))")
    p = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
                        code, str(db), str(REPO)],
                       capture_output=True, text=True)
    if p.returncode != 0 and "Permission denied" in p.stderr:
        pytest.skip(f"nobody cannot run the test python: {p.stderr[-200:]}")
    assert p.returncode == 0, p.stderr
    import json
    res = json.loads(p.stdout)
    assert res["status"] == "unknown"
    assert res["uninspectable"]["count"] > 0 and "root" in res["uninspectable"]["users"]
    assert hermes_holders.summary(res).startswith("holders unknown")


def _fake_proc(root, pid, cmdline, state="S", flags=0, fds=None):
    d = root / str(pid)
    d.mkdir()
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in cmdline) + (b"\0" if cmdline else b""))
    fields = [state, "1"] + ["0"] * 4 + [str(flags)] + ["0"] * 12 + ["4242"]
    (d / "stat").write_text(f"{pid} (x y) " + " ".join(fields) + "\n")
    if fds is None:
        (d / "fd").write_text("")  # not a directory: listdir fails like an unreadable fd table
    else:
        (d / "fd").mkdir()
        for n, target in enumerate(fds):
            os.symlink(target, d / "fd" / str(n))


def test_uninspectable_processes_counted_and_hermes_ones_named(tmp_path):
    """Fake process table: kernel threads and zombies are skipped, every other unreadable process
    is counted (an empty argv too), and those that look like Hermes are listed as possible."""
    proc = tmp_path / "proc"
    proc.mkdir()
    db = tmp_path / "state.db"
    sqlite3.connect(db).close()
    _fake_proc(proc, 2, [], flags=hermes_holders._PF_KTHREAD)
    _fake_proc(proc, 3, [], state="Z")
    _fake_proc(proc, 4, ["/opt/venv/bin/hermes", "gateway", "run"])
    _fake_proc(proc, 5, ["bash"])
    _fake_proc(proc, 6, [])
    _fake_proc(proc, 7, ["python3", "-m", "hermes_cli.main", "chat"], fds=[str(db), "/dev/null"])
    res = hermes_holders.scan(str(db), proc=str(proc))
    assert res["status"] == "unknown"
    assert res["uninspectable"]["count"] == 3  # 4, 5 and 6
    assert res["uninspectable"]["users"] == [hermes_holders._user(os.getuid())]
    possible = res["uninspectable"]["possible"]
    assert [(p["pid"], p["kind"], p["ppid"]) for p in possible] == [(4, "gateway", 1)]
    assert [(h["pid"], h["kind"], h["fds"]) for h in res["holders"]] == [(7, "tui", {"db": 1})]
    assert "3 process(es)" in res["reason"]
