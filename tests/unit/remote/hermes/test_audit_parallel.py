"""The audit's checks on several connections give what one pass on one connection gives, on every
corpus case; a budget or known base-table damage names every check it did not run."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fleetops.remote.hermes import audit as hermes_audit
from tests.corpus import damage
from tests.support.paths import REPO

CASES = sorted(damage.ALL_CASES)
# what the checks find (timings, free space and the like differ between any two runs)
EVIDENCE = ("verdict", "conditions", "reasons", "errors_by_object", "errors_total", "integrity", "honesty",
            "foreign_keys", "fts", "fts_triggers", "skipped_checks", "sqlite", "header", "open_mode", "error")


def _audit(path, **args):
    res = hermes_audit.main(dict({"db_path": str(path), "tooling": False, "holders": False}, **args))
    assert res["failed"] is False, res.get("msg")
    return res["databases"][0]


def _evidence(rec):
    return {k: rec[k] for k in EVIDENCE}


@pytest.mark.parametrize("deep", [False, True], ids=["quick", "deep"])
@pytest.mark.parametrize("case", CASES)
def test_parallel_checks_report_what_one_pass_reports(case, deep, standard_src, tmp_path):
    d = damage.make(case, standard_src, tmp_path / case / "state.db")
    one = _audit(d.path, deep=deep, jobs=1)
    many = _audit(d.path, deep=deep, jobs=3)
    assert one["verdict"] == many["verdict"] == d.expect_verdict
    assert many["errors_by_object"] == one["errors_by_object"]
    assert {n: g["count"] for n, g in ((many["integrity"] or {}).get("by_object") or {}).items()} == \
        {n: g["count"] for n, g in ((one["integrity"] or {}).get("by_object") or {}).items()}
    assert _evidence(many) == _evidence(one)
    if one["integrity"] is not None:
        assert one["parallel"]["jobs"] == 1 and many["parallel"]["jobs"] == 3
        assert set(one["checks"]) & set(many["checks"]) >= {"integrity", "index_honesty", "foreign_keys"}


def test_every_check_reports_its_cost(standard_src, tmp_path):
    d = damage.make("healthy", standard_src, tmp_path / "h.db")
    rec = _audit(d.path, jobs=2)
    assert set(rec["checks"]) == {"integrity", "index_honesty", "foreign_keys", "fts:messages_fts",
                                  "fts:messages_fts_trigram", "fts_source"}
    for name, c in rec["checks"].items():
        assert c["seconds"] >= 0 and c["cpu_seconds"] >= 0, (name, c)
        assert c["rchar"] > 0, (name, c)          # every check reads the file
    assert rec["skipped_checks"] == []


def test_a_budget_names_every_check_it_skipped(standard_src, tmp_path):
    d = damage.make("healthy", standard_src, tmp_path / "h.db")
    full = _audit(d.path)
    rec = _audit(d.path, budget_gb=0.001)
    assert rec["verdict"] == full["verdict"] == "healthy"
    walked = sorted(n for n, f in full["fts"].items() if f["index_tokens"] is not None)
    assert walked == ["messages_fts", "messages_fts_trigram"]
    assert [s["check"] for s in rec["skipped_checks"]] == ["fts_walk:" + n for n in walked]
    for s in rec["skipped_checks"]:
        assert "over the audit budget of 0.001 GB" in s["reason"]
    for n in walked:
        assert rec["fts"][n]["index_tokens"] is None and rec["fts"][n]["walk_skipped"]
        assert rec["fts"][n]["docsize_tokens"] == full["fts"][n]["docsize_tokens"]   # the cheap checks still ran
    # a budget the store fits in, or --deep, skips nothing
    assert _audit(d.path, budget_gb=1000)["skipped_checks"] == []
    assert _audit(d.path, budget_gb=0.001, deep=True)["skipped_checks"] == []


def test_fts_checks_skipped_once_base_tables_fail(standard_src, tmp_path):
    d = damage.make("not_null_nulled", standard_src, tmp_path / "n.db")
    rec = _audit(d.path)
    assert rec["verdict"] == "structural_corruption"
    assert [s["check"] for s in rec["skipped_checks"]] == ["fts:messages_fts", "fts:messages_fts_trigram"]
    assert all(rec["fts"][n]["skipped"].startswith("base tables already damaged") and not rec["fts"][n]["checked"]
               for n in ("messages_fts", "messages_fts_trigram"))
    assert not [w for w in rec["warnings"] if w["code"] == "fts_unchecked"]


def test_inspect_shows_the_skipped_checks(standard_src, tmp_path):
    d = damage.make("healthy", standard_src, tmp_path / "h.db")
    p = subprocess.run([sys.executable, "-m", "fleetops", "inspect", d.path, "--budget", "0.001"],
                       capture_output=True, text=True, cwd=str(REPO), env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "not checked: fts_walk:messages_fts: store is" in text and "fts_walk:messages_fts_trigram" in text
    p = subprocess.run([sys.executable, "-m", "fleetops", "inspect", d.path, "--budget", "0.001", "--json"],
                       capture_output=True, text=True, cwd=str(REPO))
    doc = json.loads(p.stdout)
    assert [s["check"] for s in doc["databases"][0]["skipped_checks"]] == \
        ["fts_walk:messages_fts", "fts_walk:messages_fts_trigram"]
