"""`fleetops report --html` from either backend: the same runs recorded into runs.db and into a real
PostgreSQL server (started by the suite, tests/postgres) give the same site data."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.postgres import pg_url, postgres  # noqa: F401 (fixtures)

from tests.unit.report_site.test_build import REPO, audit_result, record_run  # noqa: F401 (fixture)

from fleetops.engine.results import ResultsStore


CLOCK = ("started", "ended")   # plays are stamped when they ran, a few ms apart in the two stores
NOW = time.time() - 3600       # the runs themselves are dated (record_run's started=): compared


def _timeless(obj):
    if isinstance(obj, dict):
        return {k: _timeless(v) for k, v in obj.items()
                if not (k in CLOCK and isinstance(v, float) and v > NOW)}
    if isinstance(obj, list):
        return [_timeless(v) for v in obj]
    return obj


def _data(site: Path) -> dict:
    out = {}
    for p in sorted((site / "data").rglob("*.js")):
        text = p.read_text()
        out[p.relative_to(site).as_posix()] = json.loads(text.split(", ", 1)[1].rstrip(");\n"))
    return out


def test_same_site_from_sqlite_and_postgresql(tmp_path, pg_url, audit_result):  # noqa: F811
    hosts = ["lab01", "lab02", "lab03"]
    sites = {}
    for name, url in (("sqlite", None), ("postgresql", pg_url)):
        results = tmp_path / name
        store = ResultsStore(results, db_url=url)
        record_run(store, "20261130T080000Z-000001", hosts, audit_result, started=1796112000.0)
        record_run(store, "20261130T090000Z-000002", hosts[:2], audit_result, started=1796115600.0)
        store.close()
        site = tmp_path / f"site-{name}"
        p = subprocess.run([sys.executable, "-m", "fleetops", "report", "--html", str(site), "--results",
                            url or str(results)], cwd=str(REPO), capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, FLEETOPS_RESULTS_FILES=str(results)))
        assert p.returncode == 0, p.stderr
        assert "password" not in p.stdout and (url is None or url.split(":")[2].split("@")[0] not in p.stdout)
        sites[name] = _data(site)
    assert sites["sqlite"].keys() == sites["postgresql"].keys()
    assert len(sites["sqlite"]["data/page/runs.js"]["runs"]) == 2
    for key in sites["sqlite"]:
        a, b = sites["sqlite"][key], sites["postgresql"][key]
        if key == "data/page/runs.js":   # the controller's pid and the like are the same; the durations too
            for r in a["runs"] + b["runs"]:
                r.pop("inventory", None)
        assert _timeless(a) == _timeless(b), key
    assert {r["host"] for r in sites["postgresql"]["data/page/index.js"]["rows"]} == set(hosts)
