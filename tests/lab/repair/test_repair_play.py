"""playbooks/repair.yml and rollback.yml on the sshd lab (issue 5, "Done when").

Hosts run as their own Unix users with real `hermes gateway run` processes, a respawning
`hermes serve --isolated`, a Hermes writer appending messages and a stray sqlite3 shell; the
databases are corpus damage cases with ground truth. Every process is killed by PID at the end.
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from fleetops.remote.hermes import holders as hermes_holders
from tests.corpus import damage

from tests.support.lab_seed import report, results_by_task, run_cli

pytestmark = pytest.mark.lab

# host -> (corpus case, holders); hosts are batched [lab01] [lab02] [lab03 lab04] [lab05 lab06] [lab07 lab08]
PLAN = {
    "lab01": ("garbage_leaf_pages", ("gateway", "desktop", "writer")),     # the canary
    "lab02": ("healthy", ("gateway",)),
    "lab03": ("fts_pages_overwritten", ("gateway", "writer")),
    "lab04": ("session_duplicated_behind_title_index", ("gateway",)),
    "lab05": ("interior_page_zeroed", ("gateway",)),
    "lab06": ("healthy", ()),
    "lab07": ("fts_pages_overwritten", ("gateway", "sqlite3")),            # refused: not Hermes
    "lab08": ("unique_index_emptied", ("gateway", "small_fs")),             # refused: no room
}
REPAIRED = ("lab01", "lab03", "lab04", "lab05")
UNTOUCHED = ("lab02", "lab06")
REFUSED = ("lab07", "lab08")


def sha(p) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def rowids(db, table) -> set:
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in c.execute(f"SELECT rowid FROM {table} NOT INDEXED")}
    finally:
        c.close()


def integrity(db) -> list:
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in c.execute("PRAGMA integrity_check(1000)")]
    finally:
        c.close()


def committed(log) -> list:
    return [ln.split(" ", 1)[1].strip() for ln in Path(log).read_text().splitlines() if ln.startswith("committed ")]


def messages_with(db, texts) -> set:
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        have = {r[0] for r in c.execute("SELECT content FROM messages NOT INDEXED WHERE content LIKE 'writer %'")}
    finally:
        c.close()
    return set(texts) & have


def gateway_pids(seeder, name) -> set:
    return {h["pid"] for h in seeder.holders(name, "gateway")}


def hermes_stats_as_user(seeder, name) -> subprocess.CompletedProcess:
    h = seeder.host(name)
    env = [f"{k}={v}" for k, v in seeder._env(h).items()]
    return subprocess.run(["runuser", "-u", h["user"], "--", "env", "-i", *env, seeder.hermes, "sessions", "stats"],
                          capture_output=True, text=True, timeout=300, cwd=h["hermes"])


def seed(seeder, name, case, holders, src, tmp_path):
    d = damage.make(case, src, tmp_path / name / "state.db")
    seeder.seed_image(name, d.path)
    info = {"damage": d, "pids": {}}
    if "small_fs" in holders:
        seeder.small_fs(name, "1m")
    if "gateway" in holders:
        info["pids"]["gateway"] = seeder.gateway(name)
    if "desktop" in holders:
        info["app_log"] = seeder.desktop_app(name, backends=1, delay=(1.0, 3.0))  # respawns forever
    if "writer" in holders:
        info["writer_log"] = seeder.writer(name)
    if "sqlite3" in holders:
        info["pids"]["sqlite3"] = seeder.sqlite_shell(name)
    return info


def test_fleet_repair_check_then_run_then_report_and_rollback(lab, seeder, std_src, tmp_path):
    assert len(lab.hosts) >= len(PLAN)
    seeded = {name: seed(seeder, name, case, hold, std_src, tmp_path) for name, (case, hold) in PLAN.items()}
    before = {name: sha(seeder.host(name)["db"]) for name in PLAN}
    results = tmp_path / "runs"

    # --- --check: the verdict and path per host and profile; nothing changes ------------------------
    rc, doc = run_cli(lab, results, "--check", hermes_bin=seeder.hermes)
    check_run_id = doc["run_id"]
    by = results_by_task(doc)
    plan = {h: r[1]["msg"] for h, r in by["check mode: the path each profile would take"].items()}
    assert "default: structural_corruption -> snapshot, stop writers (check mode: would stop 3 holder(s)" \
        in plan["lab01"] and ", salvage, swap, start, verify" in plan["lab01"], plan["lab01"]
    assert "default: fts_index_damage ->" in plan["lab03"] and ", fts_rebuild, swap" in plan["lab03"], plan["lab03"]
    assert plan["lab02"] == "default: healthy -> untouched (nothing stopped, nothing restarted)"
    assert rc == 2  # the last batch is refused in check mode too
    for name, info in seeded.items():
        if "writer" not in PLAN[name][1]:  # a live writer changes the file; nothing else may
            assert sha(seeder.host(name)["db"]) == before[name], name
        assert all(hermes_holders.alive(p) for p in info["pids"].values()), name
        if "small_fs" not in PLAN[name][1]:
            assert not os.path.exists(os.path.join(seeder.host(name)["hermes"], "fleetops")), name

    # --- the rolling run --------------------------------------------------------------------------
    rc, doc = run_cli(lab, results, hermes_bin=seeder.hermes)
    by = results_by_task(doc)
    play = doc["plays"][0]
    assert play["batches"] == [["lab01"], ["lab02"], ["lab03", "lab04"], ["lab05", "lab06"], ["lab07", "lab08"]]
    assert rc == 2, doc["stats"]
    assert {h for h, s in doc["stats"].items() if s["failed"]} == set(REFUSED)

    for name in REPAIRED:
        h, info, d = seeder.host(name), seeded[name], seeded[name]["damage"]
        db = h["db"]
        st, res = by["outcome: REPAIRED"][name]
        assert st == "changed" and res["msg"].startswith("REPAIRED: default was " + d.expect_verdict), (name, res)
        assert integrity(db) == ["ok"], name
        for table, ids in d.expected_rows.items():
            missing = ids - rowids(db, table)
            assert not missing, (name, table, sorted(missing)[:10])
        if "writer_log" in info:  # every message the live writer committed before the stop is there
            texts = committed(info["writer_log"])
            assert texts and messages_with(db, texts) == set(texts), name
        # the gateway runs again, on the new file; the old one was stopped
        gws = gateway_pids(seeder, name)
        assert gws and info["pids"]["gateway"] not in gws, name
        assert not hermes_holders.alive(info["pids"]["gateway"])
        stats = hermes_stats_as_user(seeder, name)
        assert stats.returncode == 0 and "Total sessions:" in stats.stdout, (name, stats.stdout[-500:], stats.stderr[-500:])
        assert "malformed" not in stats.stdout + stats.stderr
        _, vres = by["verify (write probe, quick_check, counts, FTS, hermes sessions stats)"][name]
        assert vres["results"][0]["checks"]["hermes_sessions_stats"]["ok"] is True, name
        # the original is intact in quarantine, by sha256: the copy and the files the swap moved aside
        man = json.loads((results / doc["run_id"] / name / "hermes" / "default" / "quarantine-manifest.json").read_text())
        qdir = Path(os.path.dirname(man["copy_dir"]))
        for n, f in man["files"].items():
            assert sha(qdir / "copy" / n) == f["sha256"] and sha(qdir / "swapped-out" / n) == f["sha256"], (name, n)
        for f in ("repair-report.json", "snapshot-manifest.json", "verify.json", "writers-stop.json", "swap.json"):
            assert (results / doc["run_id"] / name / "hermes" / "default" / f).exists(), (name, f)

    # the canary: the store was fenced against the desktop backend that keeps coming back, the
    # writer was stopped, not restarted
    stop = by["stop every writer"]["lab01"][1]["results"][0]
    assert stop["fence"] and stop["msg"].startswith("fenced "), stop["msg"]
    assert {s["kind"] for s in stop["stopped"]} >= {"gateway", "desktop-serve", "tui"}

    for name in UNTOUCHED:  # nothing stopped, nothing restarted
        st, res = by["outcome: untouched (healthy: nothing stopped, nothing restarted)"][name]
        assert st == "ok" and res["msg"] == "UNTOUCHED: default healthy"
        assert by["stop every writer"][name][0] == "skipped"
        assert not os.path.exists(os.path.join(seeder.host(name)["hermes"], "fleetops", "quarantine"))
    assert gateway_pids(seeder, "lab02") == {seeded["lab02"]["pids"]["gateway"]}
    assert sha(seeder.host("lab06")["db"]) == before["lab06"]

    # refused: a stray sqlite3 shell (PID named), no room (before anything is stopped); left as they were
    msg7 = by["outcome: REFUSED or FAILED"]["lab07"][1]["msg"]
    assert msg7.startswith("REFUSED at 'preflight") and f"PID {seeded['lab07']['pids']['sqlite3']}" in msg7, msg7
    msg8 = by["outcome: REFUSED or FAILED"]["lab08"][1]["msg"]
    assert msg8.startswith("REFUSED at 'snapshot") and "not enough free space" in msg8, msg8
    for name in REFUSED:
        assert by["stop every writer"].get(name, ("not run",))[0] in ("not run", "skipped"), name
        assert all(hermes_holders.alive(p) for p in seeded[name]["pids"].values()), name
        assert gateway_pids(seeder, name) == {seeded[name]["pids"]["gateway"]}, name
        assert sha(seeder.host(name)["db"]) == before[name], name
        assert not os.path.exists(os.path.join(seeder.host(name)["hermes"], "fleetops", "snapshots")), name

    # the stored run says the same: `fleetops report` (JSON and text)
    rep = results_by_task(report(results, doc["run_id"]))
    assert set(rep["outcome: REPAIRED"]) >= set(REPAIRED)
    assert {h for h, r in rep["outcome: REPAIRED"].items() if r[0] == "changed"} == set(REPAIRED)
    assert {h for h, r in rep["outcome: untouched (healthy: nothing stopped, nothing restarted)"].items()
            if r[0] == "ok"} == set(UNTOUCHED)
    assert {h for h, r in rep["outcome: REFUSED or FAILED"].items() if r[0] == "failed"} == set(REFUSED)
    text = report(results, doc["run_id"], json_out=False)
    assert text.count("REPAIRED: default was") == len(REPAIRED) and text.count("REFUSED at") == len(REFUSED)
    # `report --audit` of the repair run: per host and profile what was done, read from the modules' results
    outcomes = {r["host"]: r for r in report(results, doc["run_id"], audit=True)["audit"]["repairs"]}
    assert {h for h, r in outcomes.items() if r["outcome"] == "REPAIRED"} == set(REPAIRED)
    assert {h for h, r in outcomes.items() if r["outcome"] == "REFUSED"} == set(REFUSED)
    assert not set(UNTOUCHED) & set(outcomes)
    assert outcomes["lab01"]["path"] == "salvage" and outcomes["lab01"]["verdict_before"] == "structural_corruption"
    assert outcomes["lab03"]["path"] == "fts_rebuild" and outcomes["lab03"]["loss_rows"] == 0
    assert outcomes["lab07"]["detail"].startswith("REFUSED at 'preflight")
    from fleetops.hermes.repair_history import load_repairs
    c = sqlite3.connect(results / "runs.db")
    try:
        every = load_repairs(c, doc["run_id"])  # all runs up to this one: the --check run did nothing
    finally:
        c.close()
    assert every and {r["run_id"] for r in every} == {doc["run_id"]}, check_run_id

    # --- rollback.yml: lab04's damaged original back exactly -------------------------------------
    man = json.loads((results / doc["run_id"] / "lab04" / "hermes" / "default" / "quarantine-manifest.json").read_text())
    rc, rdoc = run_cli(lab, results, "-l", "lab04", playbook="playbooks/rollback.yml")
    assert rc == 0, rdoc["stats"]
    assert [(r["host"], r["profile"], r["outcome"]) for r in report(results, rdoc["run_id"], audit=True)["audit"][
        "repairs"]] == [("lab04", "default", "ROLLED BACK")]
    db4 = seeder.host("lab04")["db"]
    assert sha(db4) == man["files"]["state.db"]["sha256"]
    assert gateway_pids(seeder, "lab04")  # restarted, on the original


def test_controller_killed_mid_swap_then_rerun_finishes(lab, seeder, std_src, tmp_path):
    """SIGKILL of `fleetops run` while the host is between swap steps (the swap payload dies after
    its first: state.db linked aside, the new file not yet in); the next run finishes the swap."""
    name = "lab05"
    info = seed(seeder, name, "garbage_leaf_pages", ("gateway",), std_src, tmp_path)
    h = seeder.host(name)
    journal = Path(h["hermes"]) / "fleetops" / "state" / "swap-journal.json"
    results = tmp_path / "runs"
    ctl = run_cli(lab, results, "-l", name, hermes_bin=seeder.hermes, popen=True,
                  cut_swap_after=1)
    try:
        end = time.monotonic() + 600
        while True:
            j = json.loads(journal.read_text()) if journal.exists() else {}
            if j.get("status") == "pending":
                break
            assert ctl.poll() is None, "the controller ended before the swap was interrupted: " + \
                ctl.stderr.read().decode()[-2000:] + ctl.stdout.read().decode()[-3000:]
            assert time.monotonic() < end, "no interrupted swap within 600 s"
            time.sleep(0.02)
        os.kill(ctl.pid, signal.SIGKILL)
        assert ctl.wait(timeout=60) == -signal.SIGKILL
    finally:
        if ctl.poll() is None:
            os.kill(ctl.pid, signal.SIGKILL)
            ctl.wait(timeout=60)
    # the host-side payload dies after its first step (the hook), with or without its controller
    j = json.loads(journal.read_text())
    first, last = j["moves"][0], j["moves"][-1]
    end = time.monotonic() + 120
    while not os.path.exists(first["dst"]):
        assert time.monotonic() < end, "the first rename never happened"
        time.sleep(0.05)
    # half-swapped on the host right now: the journal pending, the new file not in place
    j = json.loads(journal.read_text())
    assert j["status"] == "pending" and last["role"] == "new" and os.path.exists(last["src"])
    if first["role"] == "original-db":     # linked aside: state.db is still the original, never missing
        assert first["mode"] == "link" and os.stat(h["db"]).st_ino == os.stat(first["dst"]).st_ino
    man = json.loads((Path(j["quarantine_dir"]) / "manifest.json").read_text())

    rc, doc = run_cli(lab, results, "-l", name, hermes_bin=seeder.hermes)
    by = results_by_task(doc)
    assert rc == 0, [(t, r) for t, rs in by.items() for r in rs.values() if r[0] == "failed"]
    lease = by["take the host lease for this run"][name][1]
    assert lease.get("took_over"), lease["msg"]  # the dead run's lease, released with the reason
    rec = by["finish or undo an interrupted swap"][name][1]["results"][0]
    assert rec["recovered"]["decision"] == "finish" and rec["writers_stopped"] is True, rec
    j = json.loads(journal.read_text())
    # never half-swapped: the journal is done and state.db is the new file (its inode; the gateway
    # and the verify probe have written to it since, so not its sha256)
    new_move = j["moves"][-1]
    assert j["status"] == "done" and new_move["role"] == "new"
    assert (os.stat(h["db"]).st_dev, os.stat(h["db"]).st_ino) == (new_move["dev"], new_move["ino"])
    qdir = Path(j["quarantine_dir"])
    for n, f in man["files"].items():
        assert sha(qdir / "copy" / n) == f["sha256"] and sha(qdir / "swapped-out" / n) == f["sha256"], n
    assert integrity(h["db"]) == ["ok"]
    for table, ids in info["damage"].expected_rows.items():
        assert ids <= rowids(h["db"], table), table
    assert gateway_pids(seeder, name)  # the gateway the killed run stopped is running again
    assert by["outcome: REPAIRED"][name][0] == "changed"


def test_canary_failure_stops_the_play_before_the_next_batch(lab, seeder, std_src, tmp_path):
    seeded = {"lab01": seed(seeder, "lab01", "fts_pages_overwritten", ("gateway", "sqlite3"), std_src, tmp_path),
              "lab02": seed(seeder, "lab02", "garbage_leaf_pages", ("gateway",), std_src, tmp_path),
              "lab03": seed(seeder, "lab03", "fts_pages_overwritten", (), std_src, tmp_path)}
    before = {n: sha(seeder.host(n)["db"]) for n in seeded}
    results = tmp_path / "runs"
    rc, doc = run_cli(lab, results, "-l", "lab01,lab02,lab03", hermes_bin=seeder.hermes)
    assert rc == 2
    play = doc["plays"][0]
    assert play["batches"] == [["lab01"]]
    assert "batch 1" in play["stopped_reason"], play["stopped_reason"]
    hosts_with_results = {h for t in play["tasks"] for h in t["results"]}
    assert hosts_with_results == {"lab01"}
    for n in seeded:  # nothing changed anywhere; the canary's refusal left it as it was
        assert sha(seeder.host(n)["db"]) == before[n], n
        assert all(hermes_holders.alive(p) for p in seeded[n]["pids"].values()), n
    assert gateway_pids(seeder, "lab02") == {seeded["lab02"]["pids"]["gateway"]}
    assert not os.path.exists(os.path.join(seeder.host("lab02")["hermes"], "fleetops"))
    text = report(results, doc["run_id"], json_out=False)
    assert "stopped:" in text and "REFUSED at" in text


FAILING_STATS = """#!/bin/sh
# the real hermes, except that `hermes sessions stats` cannot read the store
if [ "$1" = sessions ]; then echo "simulated: sessions stats cannot read the store" >&2; exit 3; fi
exec {real} "$@"
"""


@pytest.mark.parametrize("rollback", [True, False], ids=["rolls-back", "opted-out"])
def test_verify_failure_after_the_swap_rolls_back_to_the_original(lab, seeder, std_src, tmp_path, rollback):
    """`hermes sessions stats` fails after the swap (a real wrapper around hermes): the rescue stops
    the writers again, puts the quarantined original back (sha256 checked), restarts the gateway
    on it and fails the host saying so; the new file is kept. Opted out, Hermes stays on the new file."""
    name = "lab06"
    info = seed(seeder, name, "fts_pages_overwritten", ("gateway",), std_src, tmp_path)
    h = seeder.host(name)
    wrapper = os.path.join(h["home"], "hermes-stats-fails")
    with open(wrapper, "w") as f:
        f.write(FAILING_STATS.format(real=seeder.hermes))
    os.chown(wrapper, *(os.stat(h["home"])[4:6]))
    os.chmod(wrapper, 0o755)
    orig_ino = os.stat(h["db"]).st_ino
    results = tmp_path / "runs"
    extra = () if rollback else ("-e", "repair_rollback_on_verify_failure=false")
    rc, doc = run_cli(lab, results, "-l", name, *extra, hermes_bin=wrapper)
    assert rc == 2
    by = results_by_task(doc)
    assert by["swap in the verified new file"][name][0] == "changed"
    msg = by["outcome: REFUSED or FAILED"][name][1]["msg"]
    assert msg.startswith("FAILED at 'verify") and "sessions stats` failed (rc 3)" in msg, msg
    run_dir = results / doc["run_id"] / name / "hermes" / "default"
    man = json.loads((run_dir / "quarantine-manifest.json").read_text())
    assert gateway_pids(seeder, name) and gateway_pids(seeder, name) != {info["pids"]["gateway"]}  # restarted
    if not rollback:
        [row] = report(results, doc["run_id"], audit=True)["audit"]["repairs"]
        assert (row["host"], row["outcome"]) == (name, "FAILED")
        assert "rollback" not in msg and by["verify failed: put the quarantined original back (sha256 checked)"][
            name][0] == "skipped"
        assert sha(h["db"]) != man["files"]["state.db"]["sha256"]
        return
    assert "|| rollback: rolled back" in msg, msg
    [row] = report(results, doc["run_id"], audit=True)["audit"]["repairs"]
    assert (row["host"], row["outcome"], row["path"]) == (name, "ROLLED BACK", "fts_rebuild")
    assert row["detail"].startswith("FAILED at 'verify")
    assert by["verify failed: stop every writer of the new file"][name][0] == "changed"
    res = by["verify failed: put the quarantined original back (sha256 checked)"][name][1]["results"][0]
    # the damaged original itself is back (the very inode the swap moved aside), the gateway on it
    assert os.stat(h["db"]).st_ino == orig_ino
    assert gateway_pids(seeder, name)
    qdir = Path(res["quarantine_dir"])
    for n, f in man["files"].items():
        assert sha(qdir / "copy" / n) == f["sha256"], n
    # the new file is kept, whole, with whatever was written to it
    aside = Path(res["rollback"]["moved_aside_dir"])
    c = sqlite3.connect(f"file:{aside / 'state.db'}?mode=ro", uri=True)
    assert c.execute("PRAGMA quick_check").fetchone() == ("ok",)
    c.close()
