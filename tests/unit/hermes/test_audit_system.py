"""What a host is: the audit payload reads architecture, OS and release, kernel, Python and SQLite
on the host, and the controller shows them (fleet table, --json rows), stores them per run and
host, and the report site's fleet and host pages show the architecture.

The payload runs for real on this machine; a second host's result says aarch64 (the field's
Oracle A1 hosts), as its payload would there.
"""
from __future__ import annotations

import copy
import io
import os
import sqlite3
import subprocess
import sys

import pytest
from rich.console import Console

from fleetops.engine.results import ResultsStore
from fleetops.hermes.audit import load_rows, print_fleet, rows_from, store_audit
from fleetops.remote.hermes import audit as hermes_audit
from fleetops.remote.hermes import audit_host

from tests.support.chromium import Chromium, chromium_path
from tests.support.paths import REPO


def os_release_id():
    with open("/etc/os-release") as f:
        return dict(line.strip().split("=", 1) for line in f if "=" in line)["ID"].strip('"')


@pytest.fixture(scope="module")
def results(std_src):
    here = hermes_audit.main({"db_path": str(std_src), "holders": False, "services": False})
    arm = copy.deepcopy(here)
    arm["host_tooling"]["system"].update(arch="aarch64", kernel="6.1.0-18-cloud-arm64", python="3.11.2",
                                         sqlite="3.40.1", os={"id": "debian", "version": "12", "name": "Debian 12"})
    return {"x86host": here, "a1-arm": arm}


def test_the_payload_reads_what_the_host_is(results):
    s = results["x86host"]["host_tooling"]["system"]
    u = os.uname()
    assert (s["arch"], s["kernel"], s["system"]) == (u.machine, u.release, u.sysname)
    assert s["os"]["id"] == os_release_id() and s["os"]["version"]
    assert s["python"] == "%d.%d.%d" % sys.version_info[:3] and s["sqlite"] == sqlite3.sqlite_version
    assert audit_host.os_release("/nonexistent") is None


def test_the_fleet_table_names_each_hosts_architecture(results):
    rows = rows_from(results)
    assert {r["host"]: r["system"]["arch"] for r in rows} == {"x86host": os.uname().machine, "a1-arm": "aarch64"}
    out = io.StringIO()
    print_fleet(rows, Console(file=out, width=320, force_terminal=False))
    text = out.getvalue()
    assert "arch" in text and "aarch64" in text and os.uname().machine in text
    assert "kernel 6.1.0-18-cloud-arm64, Python 3.11.2, SQLite 3.40.1" in text


def test_stored_per_run_and_host_and_shown_by_the_site(tmp_path, results):
    store = ResultsStore(tmp_path / "runs")
    run_id = "20261203T120000Z-abcdef"
    store.run_start(run_id, "fleetops/playbooks/audit.yml", "inventories/x.yml", {"check": False})
    store.play_start(0, "Hermes state.db audit", list(results))
    for h, res in results.items():
        store.host_result(h, 0, 0, "audit Hermes state.db", "hermes_audit", res, 0, 1)
    store.play_end(0, None)
    store.run_end("ok", {h: {"ok": 1} for h in results}, 0)
    store_audit(store, run_id, results)
    store.close()
    c = sqlite3.connect(tmp_path / "runs" / "runs.db")
    try:
        got = {r["host"]: r["system"] for r in load_rows(c, run_id)}
    finally:
        c.close()
    assert got["a1-arm"] == {"arch": "aarch64", "os_id": "debian", "os_version": "12", "os_name": "Debian 12",
                             "kernel": "6.1.0-18-cloud-arm64", "python": "3.11.2", "sqlite": "3.40.1"}
    assert got["x86host"]["arch"] == os.uname().machine
    if chromium_path() is None:
        pytest.fail("no chromium: scripts/setup.sh installs Debian's chromium package")
    site = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "fleetops", "report", "--html", str(site), "--results",
                        str(tmp_path / "runs")], cwd=str(REPO), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with Chromium(str(tmp_path / "profile")) as b:
        b.open(site / "index.html", "table.grid tbody tr")
        cells = " ".join(b.texts("table.grid tbody tr td"))
        assert "aarch64" in cells and os.uname().machine in cells
        b.open(f"{site / 'host.html'}#a1-arm", "table.grid tbody tr")
        assert "aarch64" in " ".join(b.texts("table.grid tbody tr td"))
        assert b.errors == [], b.errors
