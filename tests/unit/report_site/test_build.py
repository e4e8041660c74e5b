"""`fleetops report --html` without the lab: bad input, the store left as it was, hostile strings,
paging and `--since`, in real headless Chromium.

The stores are written by fleetops' own ResultsStore through the event calls the executor makes,
and by store_audit with a real `hermes_audit` payload result measured on a real corpus store.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest

from fleetops.engine.results import ResultsStore
from fleetops.hermes.audit import store_audit
from fleetops.report_site.build import parse_since, safe_name

from tests.support.chromium import Chromium, chromium_path
from tests.support.paths import REPO

HOSTILE = '<img src=x onerror="window.__pwned=1">'
SCRIPTY = '</script><script>window.__pwned=2</script>'


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fleetops", *args], cwd=str(REPO), capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, COLUMNS="200"))


@pytest.fixture(scope="module")
def audit_result(std_src):
    from fleetops.remote.hermes import audit as hermes_audit
    res = hermes_audit.main({"db_path": str(std_src), "holders": False, "services": False})
    assert res["databases"][0]["verdict"] == "healthy"
    return res


def record_run(store: ResultsStore, run_id: str, hosts: list, audit_result: dict, started: float | None = None,
               msg: str = "ok") -> None:
    """One audit run recorded the way the executor records it (event calls), plus its audit figures."""
    store.run_start(run_id, "fleetops/playbooks/audit.yml", "inventories/x.yml", {"check": False})
    store.play_start(0, "Hermes state.db audit", hosts)
    now = time.time()
    for h in hosts:
        store.host_result(h, 0, 0, "audit Hermes state.db", "hermes_audit", dict(audit_result, msg=msg), now, now + 0.5)
    store.play_end(0, None)
    store.run_end("ok", {h: {"ok": 1} for h in hosts}, 0)
    store_audit(store, run_id, {h: audit_result for h in hosts})
    if started is not None:
        with store.connect() as c:
            c.execute("UPDATE runs SET started=?, ended=? WHERE id=?", (started, started + 60, run_id))


def test_bad_input_is_one_line_and_exit_4(tmp_path):
    p = cli("report", "--html", str(tmp_path / "site"), "--results", str(tmp_path / "none"))
    assert p.returncode == 4 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    store = ResultsStore(tmp_path / "runs")
    store.close()
    p = cli("report", "--html", str(tmp_path / "site"), "--results", str(tmp_path / "runs"), "--since", "last tuesday")
    assert p.returncode == 4 and "--since" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    (tmp_path / "afile").write_text("x")
    p = cli("report", "--html", str(tmp_path / "afile"), "--results", str(tmp_path / "runs"))
    assert p.returncode == 4 and "directory" in p.stderr, p.stderr
    assert (tmp_path / "afile").read_text() == "x"


def test_parse_since_and_safe_names():
    assert parse_since("7d", now=1_000_000) == 1_000_000 - 7 * 86400
    assert parse_since("30m", now=1000) == 1000 - 1800
    midnight = datetime.datetime(2026, 11, 30, tzinfo=datetime.timezone.utc).timestamp()
    assert parse_since("2026-11-30") == midnight                       # UTC unless it says otherwise
    assert parse_since("2026-11-30T01:00+01:00") == midnight
    assert parse_since(None) is None
    with pytest.raises(ValueError):
        parse_since("yesterday")
    assert safe_name("lab01") == "lab01"
    assert safe_name("../etc") != safe_name("_etc") and "/" not in safe_name("../etc")
    assert safe_name("a b") != safe_name("a_b")


def test_site_leaves_the_store_alone_and_hostile_strings_stay_text(tmp_path, audit_result):
    if chromium_path() is None:
        pytest.fail("no chromium: scripts/setup.sh installs Debian's chromium package")
    results = tmp_path / "runs"
    store = ResultsStore(results)
    hosts = ["lab01", HOSTILE, "host with spaces"]
    record_run(store, "20261130T080000Z-aaaaaa", hosts, audit_result, msg=SCRIPTY)
    store.close()
    db = results / "runs.db"
    # a checkpointed, closed store: no -wal to read from, nothing that may change
    c = sqlite3.connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    site = tmp_path / "site"
    p = cli("report", "--html", str(site), "--results", str(results))
    assert p.returncode == 0, p.stderr
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    with Chromium(str(tmp_path / "profile")) as b:
        for page in ("index.html", "runs.html", "hosts.html", "repairs.html", "trends.html"):
            b.open(site / page, "main h1")
        b.open(site / "index.html", "table.grid tbody tr")
        assert HOSTILE in b.texts("table.grid tbody tr td:first-child")
        b.open(f"{site / 'run.html'}#20261130T080000Z-aaaaaa", "table.tasks tbody tr")
        b.eval("document.querySelectorAll('button.show')[0].click()")
        b.wait_for("#host-result pre")
        b.open(f"{site / 'host.html'}#{HOSTILE}", "table.grid tbody tr")
        assert HOSTILE in b.text("h1")
        assert b.eval("window.__pwned === undefined")
        assert b.errors == [], b.errors


def test_paging_and_since(tmp_path, audit_result):
    if chromium_path() is None:
        pytest.fail("no chromium: scripts/setup.sh installs Debian's chromium package")
    results = tmp_path / "runs"
    store = ResultsStore(results)
    hosts = [f"h{i:03d}" for i in range(250)]
    old = time.time() - 30 * 86400
    record_run(store, "20261101T080000Z-000001", hosts[:10], audit_result, started=old)
    record_run(store, "20261130T080000Z-000002", hosts, audit_result)
    store.close()
    site = tmp_path / "site"
    assert cli("report", "--html", str(site), "--results", str(results), "--since", "7d").returncode == 0
    runs = json.loads((site / "data/page/runs.js").read_text().split(", ", 1)[1].rstrip(");\n"))["runs"]
    assert [r["id"] for r in runs] == ["20261130T080000Z-000002"]
    with Chromium(str(tmp_path / "profile")) as b:
        b.open(site / "index.html", "table.grid tbody tr")
        assert b.eval("document.querySelectorAll('table.grid tbody tr').length") == 100
        assert b.text(".pager .count") == "1–100 of 250"
        b.eval("document.querySelectorAll('.pager button')[1].click()")
        assert b.text(".pager .count") == "101–200 of 250"
        assert b.texts("table.grid tbody tr td:first-child")[0] == "h100"
        assert b.errors == [], b.errors
    assert cli("report", "--html", str(tmp_path / "all"), "--results", str(results)).returncode == 0
    runs = json.loads((tmp_path / "all/data/page/runs.js").read_text().split(", ", 1)[1].rstrip(");\n"))["runs"]
    assert len(runs) == 2
