"""The fence: SQLite's own locks held by a keeper, so a backend respawned forever cannot win.

Against real processes: hermes_state.SessionDB (hermes-agent 0.19.0) writers and the Desktop
app double (tests/support/holder.py: `hermes serve --isolated` backends with HERMES_DESKTOP=1,
each respawned 0.5-3 s after it dies, forever, one or two at once), a real `hermes gateway run`.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetops.remote.hermes import fence as hermes_fence
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import quarantine as hermes_quarantine
from fleetops.remote.hermes import repair as hermes_repair
from fleetops.remote.hermes import start_writers as hermes_start_writers
from fleetops.remote.hermes import steplib
from fleetops.remote.hermes import stop_writers as hermes_stop_writers
from fleetops.remote.hermes import swap as hermes_swap
from fleetops.remote.hermes import verify as hermes_verify
from fleetops.remote.hermes import writers as hermes_writers
from fleetops.remote.sqlite import fence as sqlite_fence
from tests.corpus import build, damage

from tests.support.hermes_procs import (HERMES, VPY, args_for, hermes_env, holders, start_desktop_app, start_gateway,
                       start_logging_writer, wait_for)

FAST = dict(deadline=90, grace=3, systemd="false")

OPEN_AND_WRITE = r'''
import sys, time
from pathlib import Path
from hermes_state import SessionDB
try:
    db = SessionDB(db_path=Path(sys.argv[1]))
    db.create_session("probe_%d" % time.time_ns(), "cli", model="m")
    print("WROTE")
except Exception as exc:
    print("REFUSED %s: %s" % (type(exc).__name__, exc))
'''


def hermes_write(db) -> str:
    """Open db with the real SessionDB in a process of its own and write one row; what happened."""
    p = subprocess.run([str(VPY), "-c", OPEN_AND_WRITE, str(db)], capture_output=True, text=True, timeout=120,
                       env=hermes_env(Path(db).parent))
    return p.stdout.strip() or p.stderr[-500:]


def messages(db) -> set:
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return set(r[0] for r in c.execute("SELECT content FROM messages NOT INDEXED"))
    finally:
        c.close()


def committed(log) -> list:
    return [ln.split(" ", 1)[1] for ln in Path(log).read_text().splitlines() if ln.startswith("committed ")]


def anchor_process(procs):
    p = procs.add(subprocess.Popen(["sleep", "600"], start_new_session=True))
    return p, {"pid": p.pid, "start_time": sqlite_fence.start_time(p.pid)}


@pytest.mark.parametrize("mode", ["wal", "delete"])
def test_keeper_waits_for_sqlite_then_fences_until_its_anchor_dies(tmp_path, procs, mode):
    db = tmp_path / "state.db"
    build.realistic_db(db, sessions=3)
    c = sqlite3.connect(db)
    c.execute("PRAGMA journal_mode=%s" % mode).fetchall()
    c.execute("SELECT count(*) FROM sessions").fetchone()  # WAL: its SHARED lock stays while it is open
    anchor, a = anchor_process(procs)
    k = sqlite_fence.Keeper(str(db), a, ttl=300, wait=60)
    time.sleep(1.0)
    if mode == "wal":
        assert k.poll() is None  # an open WAL connection: everything it committed is not yet ours to fence
    c.close()
    info = k.wait(30)
    assert sqlite_fence.lock_owner(str(db)) == info["pid"] and sqlite_fence.alive(info)
    argv = Path("/proc/%d/cmdline" % info["pid"]).read_bytes().split(b"\0")
    assert sqlite_fence.TAG.encode() in argv
    before = db.read_bytes()
    assert hermes_write(db).startswith("REFUSED OperationalError: database is locked")
    assert db.read_bytes() == before
    # the connection goes (the anchor dies): the fence goes with it, nothing left behind
    anchor.kill()
    anchor.wait()
    wait_for(lambda: not sqlite_fence.alive(info), 30, "the keeper to end with its anchor")
    assert sqlite_fence.lock_owner(str(db)) == 0
    assert hermes_write(db) == "WROTE"


def test_keeper_gives_up_when_the_lock_never_comes(tmp_path, procs):
    db = tmp_path / "state.db"
    build.realistic_db(db, sessions=2)
    c = sqlite3.connect(db)
    c.execute("PRAGMA journal_mode=wal").fetchall()
    c.execute("SELECT 1 FROM sessions").fetchall()
    _, a = anchor_process(procs)
    k = sqlite_fence.Keeper(str(db), a, ttl=300, wait=2)
    with pytest.raises(sqlite_fence.FenceError):
        k.wait(2)
    wait_for(lambda: k.pid and not sqlite_fence.start_time(k.pid), 30, "the waiting keeper to end")
    c.execute("INSERT INTO sessions(id, source, started_at) VALUES ('after', 'cli', 1)")
    c.commit()
    c.close()


def seeded_home(tmp_path, std_image, case="fts_pages_overwritten"):
    root = tmp_path / "hermes"
    damage.make(case, std_image, root / "state.db")
    return root


def run_chain(root, a, before_swap=None, hermes=HERMES):
    """stop, quarantine, repair, swap, start, verify: the payloads in the play's order."""
    out = {"stop": hermes_stop_writers.main(dict(a, action="stop", **FAST))}
    assert not out["stop"]["failed"], out["stop"]["msg"]
    out["fenced_during_stop"] = hermes_fence.holding(dict(steplib.locate(a)))
    out["quarantine"] = q = hermes_quarantine.main(dict(a, action="quarantine"))
    assert not q["failed"], q["msg"]
    out["repair"] = rep = hermes_repair.main(a)
    assert not rep["failed"] and rep["swap"], rep["msg"]
    if before_swap:
        out["before_swap"] = before_swap(out)
    out["fenced_before_swap"] = hermes_fence.holding(dict(steplib.locate(a)))
    out["swap"] = sw = hermes_swap.main(dict(a, action="swap", new_db=rep["new_db"], expect_sha256=rep["new_sha256"]))
    assert not sw["failed"], sw["msg"]
    out["start"] = st = hermes_start_writers.main(dict(a, action="start", wait_timeout=180))
    assert not st["failed"], st["msg"]
    env = dict(build.HERMES_ENV)
    out["verify"] = ver = hermes_verify.main(dict(a, expect_counts=rep["expect_counts"], hermes_bin=str(hermes),
                                                  hermes_env=env))
    assert not ver["failed"], ver["msg"]
    return out


@pytest.mark.parametrize("backends,delay", [(1, (1.0, 3.0)), (1, (0.5, 0.5)), (2, (0.5, 3.0))],
                         ids=["one-1-3s", "one-0.5s", "two-0.5-3s"])
def test_repair_wins_against_backends_that_respawn_forever(tmp_path, std_image, procs, backends, delay):
    root = seeded_home(tmp_path, std_image)
    db = root / "state.db"
    gw = start_gateway(procs, root)
    wlog = start_logging_writer(procs, db)
    app = start_desktop_app(procs, db, backends=backends, delay=delay)
    out = run_chain(root, args_for(root, run_id="run-fence"), came_back_under_the_fence(db))
    for pid in [s.get("pid") for s in out["start"].get("started", [])]:
        procs.add_pid(pid)
    assert_repair_won(db, out, app, wlog, gw)


def came_back_under_the_fence(db):
    """Before the swap: wait until the app brought a backend back (it waits at the fence)."""
    def wait(out):
        gone = {s.get("pid") for s in out["stop"]["stopped"]}
        return wait_for(lambda: [h["pid"] for h in holders(db, "desktop-serve") if h["pid"] not in gone], 120,
                        "a backend respawned under the fence")
    return wait


def assert_repair_won(db, out, app, wlog, gw):
    stop, sw = out["stop"], out["swap"]

    # the fence was up from the stop to the swap, and the swap lifted it
    assert stop["fence"] and "fenced %s" % db in stop["msg"], stop["msg"]
    assert out["fenced_during_stop"] and out["fenced_before_swap"]
    assert out["fenced_before_swap"]["pid"] == stop["fence"]["pid"]
    assert not sqlite_fence.alive(stop["fence"])
    assert sqlite_fence.lock_owner(str(db)) in {h["pid"] for h in holders(db)} | {0}  # Hermes' own locks only
    assert hermes_fence.keepers(steplib.locate(args_for(db.parent))) == []
    # respawns reported with their PIDs: caught by the stop, found fenced by the swap, or stopped
    # after it because they held the old file; the app really did bring each of them back
    assert stop["respawn_count"] == len(stop["respawn_pids"])
    lifted = sw["swap"]["fence"]
    reported = set(stop["respawn_pids"]) | {h["pid"] for h in sw["swap"]["fenced_holders"]} | \
        {x["pid"] for x in lifted["swept"]}
    came_back = set(out["before_swap"])
    assert came_back <= reported, (came_back, reported)
    assert {p for p in reported if p in set(app.spawned())} >= came_back
    assert all(x["kind"] == "desktop-serve" for x in lifted["swept"]), lifted["swept"]
    assert lifted["ok"] and sorted(lifted["released"])[0] == stop["fence"]["pid"] and len(lifted["released"]) == 2
    assert "then the fence lifted" in sw["msg"]

    # no committed row lost: everything the writer and every backend committed is in the new file,
    # also what they committed before the fence (checked against what each recorded)
    time.sleep(2.0)  # let a respawned backend commit on the new file
    wrote = committed(wlog) + app.committed()  # read before the store: a row logged is in it
    have = messages(db)
    missing = [t for t in wrote if t not in have]
    assert wrote and not missing, missing[:5]
    # nothing can have reached the old file after its quarantine copy: the moved-aside original
    # is byte for byte the quarantined image
    man = out["quarantine"]["manifest"]
    out_dir = Path(sw["swap"]["swapped_out_dir"])
    for n, f in man["files"].items():
        assert steplib.sha256_file(str(out_dir / n)) == f["sha256"], n

    # after the swap a respawned backend holds the new file and writes to it
    new_ino = os.stat(db).st_ino
    wait_for(lambda: [p for p, ino in app.opened() if ino == new_ino and hermes_holders.alive(p)], 120,
             "a respawned backend on the new file")
    on_new = [p for p, ino in app.opened() if ino == new_ino]
    assert set(on_new) & {h["pid"] for h in holders(db, "desktop-serve")}
    n_before = len(app.committed())
    wait_for(lambda: len(app.committed()) > n_before, 60, "the backend's next commit")
    done = app.committed()
    assert set(done) <= messages(db)
    # nobody is left on the old inode; the gateway runs again, on the new file
    assert hermes_holders.scan(str(out_dir / "state.db"))["holders"] == []
    assert gw.poll() is not None
    new_gw = [h for h in holders(db, "gateway")]
    assert new_gw and new_gw[0]["pid"] != gw.pid
    assert out["verify"]["checks"]["hermes_sessions_stats"]["ok"]


V020 = Path("/opt/fleetops-test/hermes-0.20.1-venv")
BUILD_020 = r'''
import sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
for s in range(30):
    sid = "s%03d" % s
    db.create_session(sid, "cli", model="m", system_prompt="you are a test")
    db.set_session_title(sid, "title %d" % s)
    for m in range(60):
        db.append_message(sid, "user" if m % 2 == 0 else "assistant",
                          content="message %d of session %d about sqlite trigram indexes %s" % (m, s, "x" * m * 7))
db.close()
'''


def test_hermes_020_delete_mode_desktop_backends_are_recognised_and_fenced_out(tmp_path, procs):
    """Hermes 0.20.1 (hermesx, DELETE journal on this SQLite): its store built by its own code,
    its real gateway, a primary `hermesx serve --host 127.0.0.1 --port 0` and a pool `--isolated`
    backend with HERMES_DESKTOP=1, respawned forever. In DELETE mode an idle connection holds no
    lock, so the fence is granted while backends still have the file open: they must be harmless."""
    hermesx = V020 / "bin" / "hermesx"
    if not hermesx.exists():
        pytest.skip("no hermes 0.20.1 venv at %s (scripts/setup.sh builds it)" % V020)
    src = tmp_path / "built" / "state.db"
    src.parent.mkdir()
    subprocess.run([str(V020 / "bin" / "python"), "-c", BUILD_020, str(src)], check=True, capture_output=True,
                   env=hermes_env(src.parent), timeout=300)
    root = tmp_path / "hermes"
    damage.make("fts_pages_overwritten", src, root / "state.db")
    db = root / "state.db"
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    assert c.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    c.close()
    gw = start_gateway(procs, root, hermes=hermesx)
    wlog = start_logging_writer(procs, db, venv=V020)
    app = start_desktop_app(procs, db, backends=2, delay=(0.5, 3.0), venv=V020, name="hermesx", primary=True)
    kinds = {h["pid"]: (h["kind"], h["cmdline"][1:]) for h in holders(db)}
    assert kinds[gw.pid][0] == "gateway" and kinds[gw.pid][1][0] == str(hermesx)
    backends = [kinds[p] for p in app.spawned()]
    assert sorted(b[1][1:] for b in backends) == [["serve", "--host", "127.0.0.1", "--port", "0"],
                                                   ["serve", "--isolated", "--host", "127.0.0.1", "--port", "0"]]
    assert all(b[0] == "desktop-serve" for b in backends)
    out = run_chain(root, args_for(root, run_id="run-020"), came_back_under_the_fence(db), hermes=hermesx)
    for pid in [s.get("pid") for s in out["start"].get("started", [])]:
        procs.add_pid(pid)
    assert_repair_won(db, out, app, wlog, gw)


def test_no_swap_path_lifts_the_fence_and_backends_go_on_with_the_original(home, procs):
    """A healthy image: repair says nothing to do, start lifts the fence, Hermes goes on on the
    original file (the same inode), and the backend writes there again."""
    db = home / "state.db"
    app = start_desktop_app(procs, db, backends=1, delay=(0.5, 1.0))
    a = args_for(home, run_id="run-noswap")
    stop = hermes_stop_writers.main(dict(a, action="stop", **FAST))
    assert not stop["failed"] and stop["fence"], stop["msg"]
    ino = os.stat(db).st_ino
    q = hermes_quarantine.main(dict(a, action="quarantine"))
    assert not q["failed"], q["msg"]
    rep = hermes_repair.main(dict(a, restart_on_refusal=False))
    assert not rep["failed"] and not rep["swap"], rep["msg"]
    st = hermes_start_writers.main(dict(a, action="start"))
    assert not st["failed"] and st["fence_released"] == [stop["fence"]["pid"]], st
    # the keeper's locks are gone; a backend respawned since may hold SQLite's own for a moment
    assert not sqlite_fence.alive(stop["fence"]) and sqlite_fence.lock_owner(str(db)) != stop["fence"]["pid"]
    n = len(app.committed())
    wait_for(lambda: len(app.committed()) > n, 120, "the backend writing again")
    done = app.committed()
    assert os.stat(db).st_ino == ino and set(done) <= messages(db)


def test_quarantine_refuses_a_foreign_holder_even_under_the_fence(home, procs):
    db = home / "state.db"
    a = args_for(home, run_id="run-foreign")
    stop = hermes_stop_writers.main(dict(a, action="stop", **FAST))
    assert not stop["failed"] and stop["fence"], stop["msg"]
    try:
        reader = procs.add(subprocess.Popen([sys.executable, "-c", "import sys,time; f=open(sys.argv[1],'rb'); "
                                             "time.sleep(600)", str(db)], start_new_session=True))
        wait_for(lambda: holders(db), 30, "the reader to hold state.db")
        q = hermes_quarantine.main(dict(a, action="quarantine"))
        assert q["failed"] and "PID %d" % reader.pid in q["msg"], q["msg"]
    finally:
        hermes_start_writers.main(dict(a, action="start"))
    assert sqlite_fence.lock_owner(str(db)) == 0


def test_a_holder_in_a_systemd_unit_is_stopped_through_its_manager(home, procs, monkeypatch):
    """Backends that run in a user unit (Restart=always) are stopped with systemctl, never
    signalled, also when they come back (the cgroup and systemctl are faked: no user manager here)."""
    db = home / "state.db"
    desk = start_desktop_app(procs, db, backends=1, delay=(0.5, 1.0))
    calls = []

    def fake_systemctl(scope, *args, **kw):
        calls.append((scope,) + args)
        if args[:1] == ("stop",):
            for pid in desk.spawned():  # the manager stops the unit's processes
                if hermes_holders.alive(pid):
                    os.kill(pid, signal.SIGKILL)
        return 0, ""
    monkeypatch.setattr(hermes_writers, "systemctl", fake_systemctl)
    monkeypatch.setattr(hermes_writers, "cgroup_unit",
                        lambda p: ("user", "hermes-desktop.service") if p in desk.spawned() else None)
    monkeypatch.setattr(hermes_writers, "user_manager", lambda opts: True)
    monkeypatch.setattr(hermes_writers, "unit_active", lambda scope, name: False)
    r = hermes_stop_writers.main(args_for(home, action="stop", run_id="run-unit", **FAST))
    try:
        assert not r["failed"], r["msg"]
        assert ("user", "stop", "hermes-desktop.service") in calls
        assert not [s for s in r["stopped"] if s["how"].startswith("SIGTERM")], r["stopped"]
        rec = json.loads((home / "fleetops" / "state" / "default-writers.json").read_text())
        assert [u["name"] for u in rec["units"]] == ["hermes-desktop.service"]
    finally:
        monkeypatch.undo()
        hermes_fence.release(steplib.locate(args_for(home)))
