"""hermes_stop_writers / hermes_start_writers against a real `hermes gateway run`, a respawning
desktop-style `hermes serve --isolated`, and a stray sqlite3 shell."""
from __future__ import annotations

import json
import os
import stat

from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import start_writers as hermes_start_writers
from fleetops.remote.hermes import stop_writers as hermes_stop_writers
from fleetops.remote.hermes import writers as hermes_writers
from fleetops.remote.sqlite import fence as sqlite_fence

from tests.support.hermes_procs import HERMES, args_for, holders, start_desktop, start_gateway, start_sqlite_shell, wait_for

FAST = dict(quiet_window=2.5, deadline=90, grace=3, systemd="false")


def test_stop_catches_respawns_then_start_brings_the_gateway_back(home, procs):
    db = home / "state.db"
    gw = start_gateway(procs, home)
    sup = start_desktop(procs, db, respawns=2, delay=1.0)
    first_desk = holders(db, "desktop-serve")[0]["pid"]
    r = hermes_stop_writers.main(args_for(home, action="stop", **FAST))
    assert not r["failed"], r["msg"]
    assert [h for h in holders(db) if h["kind"] != "desktop-serve"] == []  # a respawn may wait at the fence
    assert gw.wait(timeout=60) is not None  # the real gateway exited
    how = {s.get("pid"): s["how"] for s in r["stopped"]}
    assert how[gw.pid] == "hermes gateway stop"
    assert how[first_desk].startswith("SIGTERM")
    # the store is fenced: a backend the supervisor brings back cannot open it (it gives up after
    # its two respawns); any respawn seen while stopping was caught and stopped
    assert r["fence"] and "fenced %s" % db in r["msg"]
    resp = [x for x in r["respawns"] if x["kind"] == "desktop-serve"]
    assert all(x["respawn"] and x["pid"] in how for x in resp), r["respawns"]
    assert ("caught %d respawn(s)" % len(resp) in r["msg"]) == bool(resp)
    wait_for(lambda: sup.poll() is not None, 60, "the supervisor to give up")
    # the record: what to restart, private
    path = home / "fleetops" / "state" / "default-writers.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    rec = json.loads(path.read_text())
    assert rec["status"] == "stopped"
    assert rec["gateway"]["argv"][-2:] == ["gateway", "run"] and rec["gateway"]["cwd"] == str(home)
    assert rec["gateway"]["env"]["HERMES_HOME"] == str(home)
    assert "env" not in (r["record"]["gateway"] or {})  # values never travel in the result
    assert not [p for p in rec["processes"] if p["kind"] == "desktop-serve"]  # the app respawns its own

    s = hermes_start_writers.main(args_for(home, action="start", wait_timeout=180))
    assert not s["failed"], s["msg"]
    assert s["fence_released"] == [r["fence"]["pid"]] and "fence lifted first" in s["msg"]
    new = [x for x in s["started"] if x.get("kind") == "gateway"][0]
    procs.add_pid(new["pid"])
    assert new["holding"]
    assert [h for h in holders(db, "gateway") if h["pid"] == new["pid"]]
    assert os.getsid(new["pid"]) != os.getsid(0)  # its own session (setsid), detached from ours
    log = home / "logs" / "fleetops-gateway.log"
    assert log.exists() and stat.S_IMODE(log.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["status"] == "restarted"
    # nothing left recorded: a second start starts nothing
    again = hermes_start_writers.main(args_for(home, action="start"))
    assert not again["failed"] and not again["changed"]


def test_sqlite_shell_holder_is_refused_and_nothing_is_stopped(home, procs):
    db = home / "state.db"
    desk = start_desktop(procs, db, respawns=0)
    desk_pid = holders(db, "desktop-serve")[0]["pid"]
    sh = start_sqlite_shell(procs, db)
    r = hermes_stop_writers.main(args_for(home, action="stop", **FAST))
    assert r["failed"] and r["refused"]
    assert "PID %d" % sh.pid in r["msg"] and "sqlite3 %s" % db in r["msg"]
    assert "Nothing was stopped" in r["msg"] and "force" in r["msg"]
    assert [f["pid"] for f in r["foreign"]] == [sh.pid]
    assert hermes_holders.alive(desk_pid) and sh.poll() is None and desk.poll() is None
    assert not (home / "fleetops" / "state" / "default-writers.json").exists()


def test_force_stops_the_foreign_holder_too(home, procs):
    db = home / "state.db"
    sh = start_sqlite_shell(procs, db)
    r = hermes_stop_writers.main(args_for(home, action="stop", force=True, **FAST))
    assert not r["failed"], r["msg"]
    assert sh.wait(timeout=30) is not None
    assert holders(db) == []


def test_endless_respawner_without_the_fence_hits_the_deadline_and_names_the_remedy(home, procs):
    """fence: false is the old quiet-window wait, which a backend respawned forever never gives."""
    db = home / "state.db"
    start_desktop(procs, db, respawns=-1, delay=0.5)
    r = hermes_stop_writers.main(args_for(home, action="stop", quiet_window=3, deadline=6, grace=2, systemd="false",
                                     fence=False))
    assert r["failed"]
    assert "close the Hermes Desktop app" in r["msg"] and "deadline" in r["msg"]
    assert sum(1 for x in r["respawns"] if x["respawn"]) >= 1


def test_endless_respawner_is_fenced_out(home, procs):
    db = home / "state.db"
    start_desktop(procs, db, respawns=-1, delay=0.5)
    r = hermes_stop_writers.main(args_for(home, action="stop", deadline=30, grace=2, systemd="false"))
    assert not r["failed"], r["msg"]
    assert r["fence"] and sqlite_fence.lock_owner(str(db)) == r["fence"]["pid"]
    assert "fenced %s" % db in r["msg"]


def test_check_mode_stops_nothing(home, procs):
    db = home / "state.db"
    start_desktop(procs, db, respawns=0)
    pid = holders(db, "desktop-serve")[0]["pid"]
    r = hermes_stop_writers.main(args_for(home, action="stop", _check=True, **FAST))
    assert not r["failed"] and not r["changed"], r["msg"]
    assert r["plan"]["signal"] == [{"pid": pid, "kind": "desktop-serve"}]
    assert hermes_holders.alive(pid)
    assert not (home / "fleetops").exists()


def test_hermes_command_from_a_holder_cmdline():
    assert hermes_writers.hermes_command(["/v/bin/python3", "/v/bin/hermes", "gateway", "run"]) == \
        ["/v/bin/python3", "/v/bin/hermes"]
    assert hermes_writers.hermes_command(["python3", "-m", "hermes_cli.main", "-p", "w", "gateway", "run"],
                                         exe="/usr/bin/python3.11") == ["/usr/bin/python3.11", "-m", "hermes_cli.main"]
    assert hermes_writers.hermes_command(["x"], hermes_bin=str(HERMES)) == [str(HERMES)]
    assert hermes_writers.hermes_command(["sqlite3", "state.db"]) is None
