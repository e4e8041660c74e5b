"""The CLI with `--results postgresql://...` on lab hosts: the audit and `report --audit` read the
same from PostgreSQL as from SQLite, two controllers run plays into one database at once, a
controller SIGKILLed mid-run shows as interrupted, and the URL's password is never printed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from fleetops.engine.results_backend import redact

from tests.support.postgres import PASSWORD
from tests.unit.engine.test_results_backend import _comparable, _everything
from tests.support.paths import REPO

pytestmark = pytest.mark.lab
ROOT = REPO


def _cmd(*args):
    return [sys.executable, "-m", "fleetops", *map(str, args)]


def _env():
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="160")
    env.pop("FLEETOPS_DEBUG", None)
    env.pop("FLEETOPS_RESULTS", None)
    return env


def _run(*args, cwd):
    p = subprocess.run(_cmd(*args), cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    assert PASSWORD not in p.stdout + p.stderr
    return p


def _seeded(lab, std_src):
    for h in lab.hosts:
        lab.seed_state_db(h["name"], str(std_src))
    return lab


def _report(results, cwd, *extra):
    p = _run("report", "latest", "--results", results, "--json", *extra, cwd=cwd)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout)


def test_audit_and_report_read_the_same_from_postgresql_as_from_sqlite(lab, std_src, pg_url, tmp_path):
    """Each backend gives back exactly what its audit stored; across the two, everything but the
    moment-bound fields (times, and holders: the machine's processes change between the runs)."""
    _seeded(lab, std_src)
    lite = tmp_path / "lite"
    audits, reports = {}, {}
    for results in (lite, pg_url):
        p = _run("audit", "-i", lab.inventory_path, "--results", results, "--json", cwd=tmp_path)
        assert p.returncode == 0 and not p.stderr, p.stderr[-2000:]
        audits[str(results)], reports[str(results)] = json.loads(p.stdout), _report(results, tmp_path, "--audit")
    for key in audits:
        stored = {(r["host"], r["profile"]): r for r in reports[key]["audit"]["databases"]}
        for r in audits[key]["databases"]:
            s = stored[(r["host"], r["profile"])]
            assert (s["verdict"], s["holders"], s["errors_total"]) == (r["verdict"], r["holders"], r["errors_total"])
    a, b = reports[str(lite)], reports[pg_url]
    moment = ("audited_at", "holders", "holders_status")
    rows = [[{k: v for k, v in r.items() if k not in moment} for r in _comparable(d["audit"])["databases"]]
            for d in (a, b)]
    assert rows[0] == rows[1] and len(rows[0]) == len(lab.hosts)
    assert _comparable(a["audit"])["trends"] == _comparable(b["audit"])["trends"]
    def shape(doc):
        options = {k: v for k, v in doc["options"].items() if k not in ("results_dir", "results_db")}
        return (doc["status"], doc["exit_code"], doc["stats"], doc["playbook"], options,
                [(p["name"], p["hosts"], p["batches"], [(t["name"], t["module"], {h: r["status"] for h, r in
                                                         t["results"].items()}) for t in p["tasks"]])
                 for p in doc["plays"]])
    assert shape(a) == shape(b)
    assert b["options"]["results_db"] == redact(pg_url) and "results_db" not in a["options"]
    text = _run("report", "latest", "--results", pg_url, "--audit", cwd=tmp_path)
    assert text.returncode == 0 and "healthy" in text.stdout
    assert PASSWORD not in _everything(pg_url)


def test_two_controllers_at_once_and_one_killed(lab, std_src, pg_url, tmp_path):
    pb = tmp_path / "pb.yml"
    pb.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n    - command: 'sleep 1'\n"
                  "    - command: 'sleep 1'\n    - command: 'sleep 1'\n")
    names = [h["name"] for h in lab.hosts]
    half = len(names) // 2
    procs = [subprocess.Popen(_cmd("run", pb, "-i", lab.inventory_path, "--limit", ",".join(part), "--results",
                                   pg_url, "--json"), cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for part in (names[:half], names[half:])]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-1000:] for o in outs]
    listing = json.loads(_run("report", "--list", "--results", pg_url, "--json", cwd=tmp_path).stdout)["runs"]
    assert [r["status"] for r in listing] == ["ok", "ok"]
    for out, part in zip(outs, (names[:half], names[half:])):
        rid = json.loads(out[0])["run_id"]
        doc = json.loads(_run("report", rid, "--results", pg_url, "--json", cwd=tmp_path).stdout)
        assert sorted(doc["stats"]) == sorted(part)
        assert all(s["changed"] == 3 for s in doc["stats"].values())

    victim = subprocess.Popen(_cmd("run", pb, "-i", lab.inventory_path, "--results", pg_url), cwd=tmp_path,
                              env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=60)
    doc = _report(pg_url, tmp_path)
    assert doc["status"] == "interrupted", doc["status"]
