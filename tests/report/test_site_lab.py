"""`fleetops report --html` from real lab runs (audit, repair, audit again), opened in real headless Chromium.

Four lab hosts, each a real sshd and Unix user with a real Hermes store made by hermes-agent and
damaged at the byte level, live `hermes gateway run` holders, and one stray sqlite3 shell that
makes the repair refuse. The site is checked in the DOM of Debian's chromium (no console error
on any page, the hosts, verdicts, counts and repair outcomes, the filters), screenshots of the
main pages are written for inspection, and the terminal tables are checked at 80 and 200 columns.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.repair_lab.conftest import REPO, hermes_venv, run_cli, seeder  # noqa: F401 (fixtures)
from tests.repair_lab.test_repair_play import seed

from .chromium import Chromium, chromium_path

pytestmark = pytest.mark.lab

# host -> (corpus case, holders); repair batches are [lab01] [lab02] [lab03 lab04]
PLAN = {
    "lab01": ("garbage_leaf_pages", ("gateway",)),             # the canary: structural, repaired
    "lab02": ("healthy", ("gateway",)),                         # untouched
    "lab03": ("fts_pages_overwritten", ("gateway",)),           # repaired
    "lab04": ("fts_pages_overwritten", ("gateway", "sqlite3")),  # refused: a holder that is not Hermes
}


def fleetops(*args, columns=200, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run([sys.executable, "-m", "fleetops", *args], cwd=str(REPO), capture_output=True, text=True,
                       timeout=900, env=dict(os.environ, COLUMNS=str(columns), TERM="dumb"))
    if check:
        assert p.returncode in (0, 2, 5), p.stderr[-3000:]
    return p


def audit(lab, results, columns=200) -> subprocess.CompletedProcess:
    return fleetops("audit", "-i", lab.inventory_path, "--results", str(results), columns=columns)


@pytest.fixture(scope="module")
def browser_needed():
    if chromium_path() is None:
        pytest.fail("no chromium: scripts/setup.sh installs Debian's chromium package")


def set_filter(b: Chromium, selector: str, value: str) -> int:
    """Set a filter control as a user would (value + the event a user's edit fires); rows shown after."""
    event = "input" if "text" in selector else "change"
    return b.eval(f"""(() => {{ const el = document.querySelector({json.dumps(selector)});
        el.value = {json.dumps(value)}; el.dispatchEvent(new Event({json.dumps(event)}));
        return +document.querySelector('table.grid').dataset.rows; }})()""")


def test_site_from_audit_repair_audit_in_chromium(lab, seeder, std_src, tmp_path, browser_needed):  # noqa: F811
    assert len(lab.hosts) >= len(PLAN)
    for name, (case, hold) in PLAN.items():
        seed(seeder, name, case, hold, std_src, tmp_path)
    results = tmp_path / "runs"
    limit = ",".join(PLAN)

    first = audit(lab, results)
    assert first.returncode == 5, first.stdout[-2000:]
    rc, doc = run_cli(lab, results, "-l", limit, hermes_bin=seeder.hermes)
    assert rc == 2 and {h for h, s in doc["stats"].items() if s["failed"]} == {"lab04"}, doc["stats"]
    repair_run = doc["run_id"]
    second = audit(lab, results)
    assert second.returncode == 5

    # --- the terminal at 80 and 200 columns: summary line first, ids whole ------------------------------
    for cols in (80, 200):
        out = audit(lab, results, columns=cols).stdout
        lines = out.splitlines()
        assert all(len(ln) <= cols for ln in lines), [ln for ln in lines if len(ln) > cols]
        assert lines[0].startswith("4 databases on 4 hosts:") and "1 fts_index_damage" in lines[0], lines[:3]
        assert "3 healthy" in lines[0]
        for host in PLAN:
            assert any(ln.split("│")[1].strip() == host for ln in lines if ln.count("│") > 2), (host, out)
        assert any("fts_index_damage" in ln and "lab04" in ln for ln in lines), out
        rep = fleetops("report", repair_run, "--results", str(results), "--audit", columns=cols).stdout
        assert all(len(ln) <= cols for ln in rep.splitlines()), [ln for ln in rep.splitlines() if len(ln) > cols]
        assert repair_run in rep.replace("\n", " ") and any(repair_run in ln for ln in rep.splitlines())

    # --- the site ------------------------------------------------------------------------------------
    site = tmp_path / "site"
    gen = fleetops("report", "--html", str(site), "--results", str(results))
    assert gen.returncode == 0 and "site written to" in gen.stdout, gen.stderr
    shots = Path(os.environ.get("FLEETOPS_REPORT_SHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    with Chromium(str(tmp_path / "chrome-profile")) as b:
        # Fleet now: newest audit of each host, worst first, counts on top
        b.open(site / "index.html", "table.grid tbody tr")
        rows = b.eval("Array.from(document.querySelectorAll('table.grid tbody tr')).map("
                      "r => Array.from(r.cells).map(c => c.innerText.trim()))")
        assert [r[0] for r in rows][0] == "lab04" and sorted(r[0] for r in rows) == sorted(PLAN), rows
        assert {r[0]: r[2] for r in rows} == {"lab01": "healthy", "lab02": "healthy", "lab03": "healthy",
                                              "lab04": "fts_index_damage"}, rows
        assert "messages_fts" in rows[0][3], rows[0]
        chips = dict((c.split()[1], int(c.split()[0])) for c in b.texts("#counts .chip"))
        assert chips == {"fts_index_damage": 1, "healthy": 3}, chips
        b.screenshot(shots / "fleet-now.png")
        assert set_filter(b, "#f-verdict", "fts_index_damage") == 1
        assert b.texts("table.grid tbody tr td:first-child") == ["lab04"]
        assert set_filter(b, "#f-verdict", "") == 4
        assert set_filter(b, "#f-group", "lab") == 4
        assert set_filter(b, "#f-text", "lab02") == 1
        assert b.texts("table.grid tbody tr td:first-child") == ["lab02"]
        assert set_filter(b, "#f-text", "no-such-host") == 0

        # Repairs: outcome, verdict before, path, rows lost, evidence copied beside the pages
        b.open(site / "repairs.html", "table.grid tbody tr")
        reps = b.eval("Array.from(document.querySelectorAll('table.grid tbody tr')).map("
                      "r => Array.from(r.cells).map(c => c.innerText.trim()))")
        by_host = {r[2]: r for r in reps}
        assert by_host["lab01"][4] == "REPAIRED" and by_host["lab01"][5] == "structural_corruption", reps
        assert by_host["lab03"][4] == "REPAIRED" and by_host["lab03"][5] == "fts_index_damage", reps
        assert by_host["lab04"][4] == "REFUSED" and "sqlite3" in by_host["lab04"][8], reps
        assert "lab02" not in by_host
        assert by_host["lab01"][6] and by_host["lab01"][7].isdigit(), by_host["lab01"]
        links = b.eval("Array.from(document.querySelectorAll('a.evidence')).map(a => a.getAttribute('href'))")
        assert any(h.endswith("salvage-report.json") for h in links), links
        for href in links:
            assert (site / href).is_file(), href
        b.screenshot(shots / "repairs.png")
        assert set_filter(b, "#f-outcome", "REFUSED") == 1

        # Trends: two audit runs, the repair marked on the time axis, per-host charts drawn
        b.open(site / "trends.html", "#host-charts .uplot")
        assert b.eval("document.querySelectorAll('.uplot').length") == 4
        assert b.eval("+document.querySelector('.chart').dataset.marks") == 1
        assert repair_run in b.text("ul.marks")
        assert b.eval("document.querySelector('#f-host').value") == "lab04"
        b.screenshot(shots / "trends.png")

        # Runs: three runs with counters; the repair run's page, bars and one host's JSON on demand
        b.open(site / "runs.html", "table.grid tbody tr")
        assert b.eval("+document.querySelector('table.grid').dataset.rows") == 3
        assert set_filter(b, "#f-status", "failed") == 3       # audits exit 5, the repair refused lab04
        b.screenshot(shots / "runs.png")
        b.open(f"{site / 'run.html'}#{repair_run}", "table.tasks tbody tr")
        words = b.texts("table.tasks a.words")
        assert any("failed on 1" in w for w in words), words
        assert b.eval("document.querySelectorAll('.sbar span').length") > 0
        b.eval("document.querySelector('button.show[data-host=lab01]').click()")
        b.wait_for("#host-result details pre")
        assert "hermes_repair" in b.text("#host-result") or "structural_corruption" in b.eval(
            "Array.from(document.querySelectorAll('#host-result pre')).map(p => p.textContent).join(' ')")
        b.screenshot(shots / "run.png")

        # Host: its history across runs and its audits
        b.open(f"{site / 'host.html'}#lab01", "table.grid tbody tr")
        assert "structural_corruption" in b.text("main") and "REPAIRED" in b.text("main")
        assert b.eval("document.querySelectorAll('.uplot').length") == 2
        b.screenshot(shots / "host.png")
        b.open(site / "hosts.html", "table.grid tbody tr")
        assert b.eval("+document.querySelector('table.grid').dataset.rows") >= 4
        assert b.errors == [], b.errors
    for name in ("fleet-now", "repairs", "trends", "runs", "run", "host"):
        assert (shots / f"{name}.png").stat().st_size > 10_000, name
    if os.environ.get("FLEETOPS_REPORT_SITE_KEEP"):
        shutil.copytree(site, os.environ["FLEETOPS_REPORT_SITE_KEEP"], dirs_exist_ok=True)
