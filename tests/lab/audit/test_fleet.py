"""Fleet audit on the lab: damage cases seeded into different hosts, verdicts and exit code via the CLI."""
from __future__ import annotations

import json
import os
import pwd
import sqlite3
import subprocess
import sys

import pytest

from tests.corpus import damage
from tests.support.paths import REPO


pytestmark = pytest.mark.lab

SEED = ["healthy", "fts_pages_overwritten", "session_duplicated_behind_title_index", "unique_index_emptied",
        "interior_page_zeroed", "zero_length", "not_sqlite", "missing"]


def _seed(host, case, src, tmp_path):
    pw = pwd.getpwnam(host["user"])
    hermes = os.path.join(pw.pw_dir, ".hermes")
    os.makedirs(hermes, exist_ok=True)
    d = damage.make(case, src, tmp_path / host["name"] / "state.db")
    for s in ("", "-wal", "-shm"):
        dst = os.path.join(hermes, "state.db" + s)
        if os.path.exists(dst):
            os.unlink(dst)
        if os.path.exists(d.path + s):
            with open(d.path + s, "rb") as f, open(dst, "wb") as g:
                g.write(f.read())
            os.chown(dst, pw.pw_uid, pw.pw_gid)
            os.chmod(dst, 0o600)
    os.chown(hermes, pw.pw_uid, pw.pw_gid)
    os.chmod(hermes, 0o700)
    return d


def _audit(lab, tmp_path, *extra):
    p = subprocess.run([sys.executable, "-m", "fleetops", "audit", "-i", lab.inventory_path, "--json",
                        "--results", str(tmp_path / "runs"), *extra],
                       capture_output=True, text=True, cwd=str(REPO), timeout=900)
    return p, (json.loads(p.stdout) if p.stdout.strip() else None)


def test_fleet_verdicts_and_exit_code(lab_clean, standard_src, tmp_path):
    hosts = lab_clean.hosts
    assert len(hosts) >= len(SEED)
    expected = {}
    for host, case in zip(hosts, SEED):
        expected[host["name"]] = _seed(host, case, standard_src, tmp_path)
    p, doc = _audit(lab_clean, tmp_path)
    assert doc is not None, p.stderr[-3000:]
    assert p.returncode == 5 and doc["exit_code"] == 5 and doc["engine_exit_code"] == 0, p.stderr[-2000:]
    got = {(r["host"], r["profile"]): r for r in doc["databases"]}
    for name, d in expected.items():
        r = got[(name, "default")]
        assert r["verdict"] == d.expect_verdict, (name, d.name, r["reasons"])
        integ = (doc["hosts"][name]["databases"][0].get("integrity") or {}).get("by_object") or {}
        assert set(integ) == set(d.expect_errors_in), (name, d.name)
    # worst first
    sev = [r["verdict"] for r in doc["databases"]]
    assert sev.index("structural_corruption") < sev.index("healthy")
    # the lab users cannot read root's /proc/PID/fd: never "none"
    assert all(r["holders_status"] == "unknown" for r in doc["databases"] if r["verdict"] != "missing")
    # figures stored per run/host/profile
    con = sqlite3.connect(tmp_path / "runs" / "runs.db")
    n = con.execute("SELECT count(*) FROM audit_db WHERE run_id=?", (doc["run_id"],)).fetchone()[0]
    assert n == len(doc["databases"])
    con.close()


def test_fleet_all_healthy_exits_0_and_report(lab_clean, standard_src, tmp_path):
    for host in lab_clean.hosts:
        _seed(host, "healthy", standard_src, tmp_path)
    p, doc = _audit(lab_clean, tmp_path, "--deep")
    assert p.returncode == 0, (p.stderr[-2000:], doc and [r["reasons"] for r in doc["databases"]])
    assert {r["verdict"] for r in doc["databases"]} == {"healthy"}
    p2, doc2 = _audit(lab_clean, tmp_path)
    assert p2.returncode == 0
    from fleetops.hermes.audit import document
    rep = document({"id": doc2["run_id"], "results_dir": str(tmp_path / "runs")})
    assert len(rep["trends"]) == len(lab_clean.hosts)
    assert all(len(t["runs"]) == 2 for t in rep["trends"])
    # what each host is, read on the host over SSH: in the --json rows, the results store and the table
    u = os.uname()
    for rows in (doc["databases"], rep["databases"]):
        assert {(r["system"]["arch"], r["system"]["kernel"]) for r in rows} == {(u.machine, u.release)}
        assert all(r["system"]["python"] and r["system"]["sqlite"] and r["system"]["os_id"] for r in rows)
    t = subprocess.run([sys.executable, "-m", "fleetops", "audit", "-i", lab_clean.inventory_path, "--results",
                        str(tmp_path / "runs")], capture_output=True, text=True, cwd=str(REPO), timeout=900,
                       env=dict(os.environ, COLUMNS="240"))
    assert t.returncode == 0 and " arch " in t.stdout and u.machine in t.stdout, t.stdout[-2000:]
