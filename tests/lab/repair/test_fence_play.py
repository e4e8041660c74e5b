"""playbooks/repair.yml on lab hosts whose Desktop app respawns its backend forever.

Per host, as its own Unix user over real sshd: a real `hermes gateway run` (hermes-agent 0.19.0),
a writer appending through the real SessionDB that logs what it committed, and the Desktop app
double (tests/support/holder.py) keeping one or two `hermes serve --isolated` backends alive,
each restarted 0.5-3 s after it dies, for as long as it runs. The repair must fence the store,
lose no committed row, and leave the respawned backend on the new file.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.sqlite import fence as sqlite_fence
from tests.corpus import damage

from tests.support.lab_seed import results_by_task, run_cli

pytestmark = pytest.mark.lab

HOSTS = {  # host -> (backends, respawn delay range in s)
    "lab01": (1, (1.0, 3.0)),
    "lab02": (1, (0.5, 0.5)),
    "lab03": (2, (0.5, 3.0)),
}


def lines(log, word) -> list:
    p = Path(log)
    return [ln.split(" ", 1)[1] for ln in p.read_text().splitlines() if ln.startswith(word + " ")] if p.exists() else []


def messages(db) -> set:
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in c.execute("SELECT content FROM messages NOT INDEXED")}
    finally:
        c.close()


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.1)


def keepers(h) -> list:
    rec = Path(h["hermes"]) / "fleetops" / "state" / "default-fence.json"
    return json.loads(rec.read_text()).get("keepers") or [] if rec.exists() else []


def seed_host(seeder, name, src, tmp_path, backends, delay):
    d = damage.make("fts_pages_overwritten", src, tmp_path / name / "state.db")
    seeder.seed_image(name, d.path)
    h = seeder.host(name)
    info = {"gateway": seeder.gateway(name), "writer_log": seeder.writer(name, interval=0.1),
            "app_log": seeder.desktop_app(name, backends=backends, delay=delay), "ino": os.stat(h["db"]).st_ino}
    return info


def check_repaired(seeder, name, info, by):
    h = seeder.host(name)
    db = h["db"]
    st, res = by["outcome: REPAIRED"][name]
    assert st == "changed" and "respawned process(es) seen during the repair" in res["msg"], res["msg"]
    stop = by["stop every writer"][name][1]["results"][0]
    assert stop["fence"] and stop["msg"].startswith("fenced "), stop["msg"]
    sw = by["swap in the verified new file"][name][1]["results"][0]
    assert sw["swap"]["fence"]["ok"] and "then the fence lifted" in sw["msg"], sw["msg"]
    # the respawns it reports are processes the Desktop app double really started
    seen = {x["pid"] for x in sw["swap"]["fence"]["seen"]}
    assert seen <= {int(p) for p in lines(info["app_log"], "spawned")}, seen
    # the fence is gone with its keepers; none is left running on the host
    assert keepers(h) == [] or not any(sqlite_fence.alive(k) for k in keepers(h))
    assert not sqlite_fence.alive(stop["fence"])
    # after the swap a respawned backend opens the new file and commits there
    new_ino = os.stat(db).st_ino
    assert new_ino != info["ino"]
    on_new = wait_for(lambda: [int(p) for p, ino in (x.split() for x in lines(info["app_log"], "opened"))
                               if int(ino) == new_ino and hermes_holders.alive(int(p))], 120,
                      f"{name}: a respawned backend on the new file")
    assert set(on_new) & {x["pid"] for x in seeder.holders(name, "desktop-serve")}
    n = len(lines(info["app_log"], "committed"))
    wait_for(lambda: len(lines(info["app_log"], "committed")) > n, 60, f"{name}: the backend's next commit")
    # every row any process recorded as committed (before the fence, and after the swap) is there
    wrote = lines(info["writer_log"], "committed") + lines(info["app_log"], "committed")
    have = messages(db)
    missing = [t for t in wrote if t not in have]
    assert wrote and not missing, (name, len(missing), missing[:3])
    # the gateway runs again, on the new file
    gws = {x["pid"] for x in seeder.holders(name, "gateway")}
    assert gws and info["gateway"] not in gws and not hermes_holders.alive(info["gateway"])


def test_rolling_repair_over_hosts_whose_backends_respawn_forever(lab, seeder, std_src, tmp_path):
    seeded = {n: seed_host(seeder, n, std_src, tmp_path, *HOSTS[n]) for n in HOSTS}
    rc, doc = run_cli(lab, tmp_path / "runs", "-l", ",".join(HOSTS), hermes_bin=seeder.hermes)
    by = results_by_task(doc)
    failed = {(t, h): r[1].get("msg") for t, rs in by.items() for h, r in rs.items() if r[0] in ("failed", "unreachable")}
    assert rc == 0 and not failed, (rc, doc["plays"][0].get("stopped_reason"), failed)
    assert doc["plays"][0]["batches"] == [["lab01"], ["lab02"], ["lab03"]]
    for name, info in seeded.items():
        check_repaired(seeder, name, info, by)


def test_controller_killed_while_the_fence_is_held_then_the_next_run_repairs(lab, seeder, std_src, tmp_path):
    name = "lab04"
    info = seed_host(seeder, name, std_src, tmp_path, 2, (0.5, 3.0))
    h = seeder.host(name)
    results = tmp_path / "runs"
    ctl = run_cli(lab, results, "-l", name, hermes_bin=seeder.hermes, popen=True)
    try:
        def fenced():
            live = [k for k in keepers(h) if sqlite_fence.alive(k)]
            return [k for k in live if sqlite_fence.lock_owner(h["db"]) == k["pid"]]
        def fenced_or_ended():
            return fenced() or (ctl.poll() is not None and ["ended"])
        [keeper] = wait_for(fenced_or_ended, 600, "the fence to be held")
        assert keeper != "ended", "the run ended before the fence was seen: " + ctl.stderr.read().decode()[-2000:]
        ctl.send_signal(signal.SIGKILL)
        assert ctl.wait(timeout=60) == -signal.SIGKILL
    finally:
        if ctl.poll() is None:
            ctl.kill()
            ctl.wait(timeout=60)
    # the connection went with the controller, and the fence with it
    wait_for(lambda: not sqlite_fence.alive(keeper), 60, "the keeper to end with the connection")
    assert sqlite_fence.lock_owner(h["db"]) != keeper["pid"]
    # the original is in place (never swapped), no swap half done; Hermes can write to it again
    assert os.stat(h["db"]).st_ino == info["ino"]
    journal = Path(h["hermes"]) / "fleetops" / "state" / "swap-journal.json"
    assert not journal.exists() or json.loads(journal.read_text()).get("status") != "pending"
    n = len(lines(info["app_log"], "committed"))
    wait_for(lambda: len(lines(info["app_log"], "committed")) > n, 120, "a backend writing to the original again")
    assert os.stat(h["db"]).st_ino == info["ino"]

    rc, doc = run_cli(lab, results, "-l", name, hermes_bin=seeder.hermes)
    by = results_by_task(doc)
    assert rc == 0, {t: r[name][1].get("msg") for t, r in by.items() if name in r and r[name][0] == "failed"}
    check_repaired(seeder, name, info, by)
