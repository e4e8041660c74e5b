"""Is Hermes persisting? The audit on lab hosts where the real Hermes 0.19.0 gateway ran.

Every log line the audit reads here was written by the real hermes-agent 0.19.0 (its own
logging set-up, its own gateway code), as the host's Unix user:

- fallback: the real `hermes gateway run` started on a store it could not open, logged
  "SQLite session store not available" and carried on; the store was then restored from a
  healthy copy under it (quick_check passes), and the gateway never reopened it;
- errors: the real gateway SessionStore (gateway.session, driven by a script because the lab has
  no messaging platform to deliver messages) appended to a store with a zeroed messages page:
  Hermes logged one "transcript append failed ... database disk image is malformed" per message;
- busy: a healthy store, the real gateway holding it and a real SessionDB writer appending.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import pytest

from tests.corpus import damage
from tests.support.seed import Seeder, find_venv
from tests.support.paths import REPO

pytestmark = pytest.mark.lab


# Real gateway session code with Hermes' own log files: one message every INTERVAL seconds.
DRIVER_PY = r'''
import os, sys, time, uuid
from pathlib import Path
home = Path(os.environ["HERMES_HOME"])
from hermes_logging import setup_logging
setup_logging(hermes_home=home, mode="gateway")
from gateway.config import GatewayConfig
from gateway.session import SessionStore
store = SessionStore(home / "sessions", GatewayConfig())
sid = "telegram_" + uuid.uuid4().hex[:8]
try:
    store._db.create_session(sid, "telegram", model="test-model")
except Exception as exc:
    print("create_session failed: %s" % exc, flush=True)
for i in range(int(sys.argv[1])):
    store.append_to_transcript(sid, {"role": "user", "content": "message %d about the weather" % i,
                                     "timestamp": time.time()})
    time.sleep(float(sys.argv[2]))
'''


@pytest.fixture(scope="module")
def hermes_venv():
    v = find_venv()
    if v is None:
        pytest.skip("no hermes-agent venv the lab users can run: /opt/fleetops-test/hermes-venv-shared")
    return v


@pytest.fixture
def seeder(lab, hermes_venv, tmp_path):
    s = Seeder(lab, tmp_path / "seed-registry.json", venv=hermes_venv)
    for h in lab.hosts:
        s.wipe(h["name"])
    yield s
    s.stop_all()


def _wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.3)


def _read(path) -> str:
    try:
        return open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return ""


def _log_utc(line: str) -> str:
    """A Hermes log line's local timestamp as the audit reports it (UTC, seconds)."""
    t = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + float("0." + line[20:23])
    return datetime.datetime.utcfromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%SZ")


def _audit(lab, tmp_path, *extra):
    p = subprocess.run([sys.executable, "-m", "fleetops", "audit", "-i", lab.inventory_path, "--json",
                        "--results", str(tmp_path / "runs"), *extra],
                       capture_output=True, text=True, cwd=str(REPO), timeout=900)
    assert p.stdout.strip(), p.stderr[-3000:]
    return p, json.loads(p.stdout)


def _seed_fallback(seeder, name, src, tmp_path, in_place=True) -> int:
    """Gateway started on an unreadable store (it falls back), then the store restored under it:
    in place (`cp recovered-state.db state.db`, the field report's step: same inode) or by
    replacing the file (a new inode: the gateway keeps the old one open)."""
    d = damage.make("not_sqlite", src, tmp_path / "fallback" / "state.db")
    h = seeder.seed_image(name, d.path)
    logs = os.path.join(h["hermes"], "logs")
    p = seeder._spawn(h, "gateway", f"exec {seeder.hermes} gateway run", "seed-gateway.log")
    _wait_for(lambda: "SQLite session store not available" in _read(os.path.join(logs, "gateway.log")), 240,
              f"{name}: the gateway's fallback line (gateway PID {p.pid})")
    _wait_for(lambda: os.path.exists(os.path.join(h["hermes"], "gateway.pid")), 60, f"{name}: gateway.pid")
    time.sleep(1.5)  # the restore comes after the fallback, as an operator's would
    if in_place:
        with open(src, "rb") as f, open(h["db"], "wb") as g:
            g.write(f.read())
    else:
        seeder.seed_image(name, src)
    return json.load(open(os.path.join(h["hermes"], "gateway.pid")))["pid"]


def _seed_write_errors(seeder, name, src, tmp_path, messages=40, interval=0.3) -> str:
    d = damage.make("interior_page_zeroed", src, tmp_path / "errors" / "state.db")
    h = seeder.seed_image(name, d.path)
    sd = seeder._scripts(h)
    drv = os.path.join(sd, "drive.py")
    with open(drv, "w") as f:
        f.write(DRIVER_PY)
    os.chown(drv, h["uid"], h["gid"])
    p = seeder._spawn(h, "gateway-session", f"exec {seeder.venv}/bin/python {drv} {messages} {interval}",
                      "seed-driver.log")
    p.wait(timeout=300)
    return os.path.join(h["hermes"], "logs", "errors.log")


def _seed_busy(seeder, name, src) -> str:
    seeder.seed_image(name, src)
    seeder.gateway(name)
    return seeder.writer(name, interval=0.2)


def test_not_persisting_errors_and_busy_host(lab, seeder, std_src, tmp_path):
    hosts = [h["name"] for h in lab.hosts]
    assert len(hosts) >= 3, "FLEETOPS_LAB_HOSTS must be at least 3"
    fb_host, err_host, busy_host = hosts[:3]
    swapped_host = hosts[3] if len(hosts) > 3 else None
    gw_pid = _seed_fallback(seeder, fb_host, std_src, tmp_path)
    if swapped_host:
        _seed_fallback(seeder, swapped_host, std_src, tmp_path / "swapped", in_place=False)
    errors_log = _seed_write_errors(seeder, err_host, std_src, tmp_path)
    writer_log = _seed_busy(seeder, busy_host, std_src)
    committed_before = _read(writer_log).count("committed")

    p, doc = _audit(lab, tmp_path)
    assert p.returncode == 5, p.stderr[-2000:]
    rows = {r["host"]: r for r in doc["databases"] if r["profile"] == "default"}
    full = {h: doc["hosts"][h]["databases"][0] for h in (fb_host, err_host, busy_host)}

    # fallback: the file is fine, the host is not persisting
    fb, fbr = rows[fb_host], full[fb_host]
    assert fbr["integrity"]["ok"] is True and fbr["integrity"]["error_count"] == 0, fbr["integrity"]
    assert fb["verdict"] == "not_persisting", (fb["verdict"], fb["reasons"])
    assert fb["persisting"] == "no" and "not_persisting" in fb["conditions"]
    assert any(f"gateway PID {gw_pid}" in r and "SQLite session store not available" in r for r in fb["reasons"]), \
        fb["reasons"]
    assert fb["persistence"]["write_errors"]["store_unavailable"]["count"] == 1
    assert fb["persistence"]["gateway"]["pid"] == gw_pid
    assert fbr["persistence"]["filesystem"]["fstype"], fbr["persistence"]["filesystem"]
    if swapped_host:  # the old file still held: the retired verdict stays first, the condition is there too
        sw = rows[swapped_host]
        assert sw["verdict"] == "retired_wal" and "not_persisting" in sw["conditions"], (sw["verdict"], sw["reasons"])

    # write errors: counted by kind with first and last time, exactly as Hermes logged them
    er = rows[err_host]
    lines = [ln for ln in _read(errors_log).splitlines() if "database disk image is malformed" in ln
             and "FTS-corruption" not in ln]
    assert len(lines) >= 30, _read(errors_log)[-2000:]
    mal = er["persistence"]["write_errors"]["malformed"]
    assert mal["count"] == len(lines) and mal["last_hour"] == len(lines), (mal, len(lines))
    assert (mal["first"], mal["last"]) == (_log_utc(lines[0]), _log_utc(lines[-1]))
    assert "write_errors" in er["warnings"]
    assert er["verdict"] == "structural_corruption" and "not_persisting" in er["conditions"], er["conditions"]
    assert er["persistence"]["errors_after_last_write"].get("malformed", 0) > 0

    # a healthy busy host is not flagged
    bz = rows[busy_host]
    assert _read(writer_log).count("committed") > committed_before, "the writer stopped committing"
    assert bz["verdict"] == "healthy", (bz["verdict"], bz["reasons"])
    assert bz["persisting"] == "yes", bz["persistence"]
    assert "not_persisting" not in bz["conditions"] and "write_errors" not in bz["warnings"]
    assert bz["persistence"]["gateway"]["holds_store"] is True, bz["persistence"]

    # the central results and the report carry the condition and its evidence
    con = sqlite3.connect(tmp_path / "runs" / "runs.db")
    got = dict(con.execute("SELECT host, persisting FROM audit_persistence WHERE run_id=?", (doc["run_id"],)))
    n_err = con.execute("SELECT write_errors FROM audit_persistence WHERE run_id=? AND host=?",
                        (doc["run_id"], err_host)).fetchone()[0]
    con.close()
    assert (got[fb_host], got[err_host], got[busy_host]) == ("no", "no", "yes")
    assert n_err >= len(lines)
    rep = subprocess.run([sys.executable, "-m", "fleetops", "report", doc["run_id"], "--results",
                          str(tmp_path / "runs"), "--audit", "--json"], capture_output=True, text=True,
                         cwd=str(REPO), timeout=120)
    assert rep.returncode == 0, rep.stderr[-2000:]
    rdoc = json.loads(rep.stdout)
    audit = next(v for v in _walk_dicts(rdoc) if "databases" in v and "trends" in v)
    rr = {r["host"]: r for r in audit["databases"]}
    assert rr[fb_host]["verdict"] == "not_persisting" and rr[fb_host]["persistence"]["persisting"] == "no"
    tr = {t["host"]: t for t in audit["trends"]}
    assert tr[err_host]["runs"][-1]["persisting"] == "no" and tr[err_host]["runs"][-1]["write_errors"] >= len(lines)
    text = subprocess.run([sys.executable, "-m", "fleetops", "report", doc["run_id"], "--results",
                           str(tmp_path / "runs"), "--audit"], capture_output=True, text=True, cwd=str(REPO),
                          timeout=120, env=dict(os.environ, COLUMNS="250")).stdout
    assert re.search(r"not_persisting", text) and "persisting (write errors)" in text, text[-3000:]
    assert f"malformed {len(lines)} (last hour {len(lines)}" in text, text[-3000:]


def _walk_dicts(o):
    if isinstance(o, dict):
        yield o
        for v in o.values():
            yield from _walk_dicts(v)
    elif isinstance(o, list):
        for v in o:
            yield from _walk_dicts(v)


def test_write_probe_beside_a_live_writer_and_refused_on_damage(lab, seeder, std_src, tmp_path):
    hosts = [h["name"] for h in lab.hosts]
    err_host, busy_host = hosts[:2]
    _seed_write_errors(seeder, err_host, std_src, tmp_path, messages=5, interval=0.1)
    writer_log = _seed_busy(seeder, busy_host, std_src)
    _p, first = _audit(lab, tmp_path)
    before = _read(writer_log)
    p, doc = _audit(lab, tmp_path, "--write-probe")
    assert p.returncode == 5, p.stderr[-2000:]
    rows = {r["host"]: r for r in doc["databases"] if r["profile"] == "default"}
    wp = rows[busy_host]["persistence"]["write_probe"]
    assert wp["done"] and wp["ok"] and wp["journal_mode"] == "wal", wp
    assert rows[busy_host]["verdict"] == "healthy"
    refused = rows[err_host]["persistence"]["write_probe"]
    assert refused["done"] is False and "structural_corruption" in refused["refused"], refused
    _wait_for(lambda: _read(writer_log).count("committed") > before.count("committed") + 5, 60,
              "the writer to keep committing after the probe")
    after = _read(writer_log)[len(before):]
    assert "error" not in after, after[-2000:]
    # two runs: report --audit trends the condition run by run
    rep = subprocess.run([sys.executable, "-m", "fleetops", "report", doc["run_id"], "--results",
                          str(tmp_path / "runs"), "--audit", "--json"], capture_output=True, text=True,
                         cwd=str(REPO), timeout=120)
    audit = next(v for v in _walk_dicts(json.loads(rep.stdout)) if "databases" in v and "trends" in v)
    tr = {t["host"]: [r["run_id"] for r in t["runs"]] for t in audit["trends"]}
    assert tr[busy_host] == [first["run_id"], doc["run_id"]]
    pers = {t["host"]: [r["persisting"] for r in t["runs"]] for t in audit["trends"]}
    assert pers[busy_host] == ["yes", "yes"] and pers[err_host][-1] in ("errors", "no")
