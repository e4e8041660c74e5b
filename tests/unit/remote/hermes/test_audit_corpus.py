"""Every corpus damage case through the audit checks: exact verdict and the objects errors are counted in."""
from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys

import pytest

from fleetops.remote.hermes import audit as hermes_audit
from tests.corpus import damage
from tests.support.paths import REPO


CASES = sorted(damage.ALL_CASES)


def _audit(path, deep=False):
    res = hermes_audit.main({"db_path": str(path), "deep": deep, "tooling": False, "holders": False})
    assert res["failed"] is False, res.get("msg")
    assert len(res["databases"]) == 1
    return res["databases"][0]


@pytest.mark.parametrize("deep", [False, True], ids=["quick", "deep"])
@pytest.mark.parametrize("case", CASES)
def test_case_verdict_and_objects(case, deep, standard_src, tmp_path):
    d = damage.make(case, standard_src, tmp_path / case / "state.db")
    rec = _audit(d.path, deep=deep)
    assert rec["verdict"] == d.expect_verdict, rec["reasons"]
    by_obj = (rec["integrity"] or {}).get("by_object") or {}
    assert set(by_obj) == set(d.deep_errors_in if deep else d.expect_errors_in)
    if d.expect_verdict == "healthy":
        assert rec["errors_total"] == 0 and rec["reasons"] == []


def test_duplicated_session_counts(standard_src, tmp_path):
    """Field report 02: count(*) says n, the table scan n+1, distinct keys n; one error line in sessions."""
    d = damage.make("session_duplicated_behind_title_index", standard_src, tmp_path / "s.db")
    rec = _audit(d.path)
    h = rec["honesty"]["sessions"]
    assert h["count_scan"] == h["distinct_rowid"] + 1 == h["distinct_pk"] + 1
    assert h["count"] == h["count_scan"] - 1  # answered from an index that holds the row once
    assert h["duplicates"] == 1
    assert rec["integrity"]["by_object"]["sessions"]["count"] == 1
    assert rec["errors_by_object"]["sessions"] == 2  # 1 integrity line + 1 duplicated row
    # indexes hold each distinct row once: not blamed
    assert all(i["ok"] for i in h["indexes"].values())


def test_emptied_unique_index_counted(standard_src, tmp_path):
    d = damage.make("unique_index_emptied", standard_src, tmp_path / "u.db")
    rec = _audit(d.path)
    idx = rec["honesty"]["sessions"]["indexes"]["idx_sessions_title_unique"]
    # ground truth: the table itself (intact here) scanned without any index
    con = sqlite3.connect(f"file:{d.path}?mode=ro", uri=True)
    try:
        titled = con.execute("SELECT count(*) FROM sessions NOT INDEXED WHERE title IS NOT NULL").fetchone()[0]
    finally:
        con.close()
    assert titled > 0
    assert idx["entries"] == 0 and idx["expected"] == titled
    assert rec["errors_by_object"] == {"idx_sessions_title_unique": titled}
    assert rec["conditions"] == ["index_damage"]


def test_renumbered_row_caught_without_deep(standard_src, tmp_path):
    """Counts agree, rowids do not: the index fingerprint (sum of rowids) catches it without --deep."""
    d = damage.make("garbage_huge_rowid", standard_src, tmp_path / "g.db")
    rec = _audit(d.path)
    bad = {n for n, i in rec["honesty"]["sessions"]["indexes"].items() if not i["ok"]}
    assert bad == set(d.deep_errors_in)
    assert all(i["entries"] == i["expected"] for i in rec["honesty"]["sessions"]["indexes"].values())


def test_fts_damage_names_shadow_tables_and_base_tables_verify(standard_src, tmp_path):
    d = damage.make("fts_pages_overwritten", standard_src, tmp_path / "f.db")
    rec = _audit(d.path)
    assert rec["conditions"] == ["fts_index_damage"]
    assert all(not h["errors"] and not h["duplicates"] for h in rec["honesty"].values())
    assert rec["foreign_keys"]["violations"] == 0
    assert rec["fts"]["messages_fts_trigram"]["ok"] is False


def test_healthy_fts_checked_read_only(standard_src, tmp_path):
    d = damage.make("healthy", standard_src, tmp_path / "h.db")
    rec = _audit(d.path)
    for name in ("messages_fts", "messages_fts_trigram"):
        f = rec["fts"][name]
        assert f["checked"] and f["ok"], f
        assert f["index_tokens"] == f["docsize_tokens"] > 0
        assert f["probe"]["rows"] >= 1
    assert rec["sqlite"]["schema_version"] == 22  # hermes-agent 0.19.0
    assert rec["fts_triggers"] == 6


def test_missing_profile_dir(tmp_path):
    res = hermes_audit.main({"hermes_home": str(tmp_path / "nohermes"), "tooling": False, "services": False})
    assert [d["verdict"] for d in res["databases"]] == ["missing"]
    assert res["healthy"] is False


def test_profiles_discovered_and_active_profile_not_followed(standard_src, tmp_path):
    from tests.corpus import build
    root = tmp_path / ".hermes"
    build.copy_image(standard_src, root / "state.db")
    build.copy_image(standard_src, root / "profiles" / "work" / "state.db")
    (root / "profiles" / "Bad Name").mkdir(parents=True)
    (root / "active_profile").write_text("work\n")
    res = hermes_audit.main({"hermes_home": str(root), "tooling": False, "services": False, "holders": False})
    got = {d["profile"]: d["verdict"] for d in res["databases"]}
    assert got == {"default": "healthy", "work": "healthy"}
    assert res["active_profile"] == "work"
    assert res["databases"][0]["db"] == str(root / "state.db")
    res = hermes_audit.main({"hermes_home": str(root), "hermes_profiles": "work, nope", "tooling": False,
                             "services": False, "holders": False})
    assert {d["profile"]: d["verdict"] for d in res["databases"]} == {"work": "healthy", "nope": "missing"}


@pytest.mark.parametrize("case,code", [("healthy", 0), ("not_null_nulled", 5), ("missing", 5)])
def test_inspect_cli_exit_codes(case, code, standard_src, tmp_path):
    d = damage.make(case, standard_src, tmp_path / case / "state.db")
    p = subprocess.run([sys.executable, "-m", "fleetops", "inspect", d.path, "--json"],
                       capture_output=True, text=True, cwd=str(REPO))
    assert p.returncode == code, p.stderr
    doc = json.loads(p.stdout)
    assert doc["databases"][0]["verdict"] == d.expect_verdict
    tool = doc["host_tooling"]
    assert tool["sqlite_version"] == sqlite3.sqlite_version
    assert tool["recover"].split(":")[0] == _recover_truth(d.path if case != "missing" else None, tmp_path)


def _recover_truth(path, tmp_path) -> str:
    """Whether this machine's sqlite3 shell really recovers rows: `.recover` run on a copy of the
    corpus store itself (or on a fresh one-row file), not on the product's own probe."""
    shell = shutil.which("sqlite3")
    if shell is None:
        return "no sqlite3 shell"
    src = tmp_path / "truth.db"
    if path:
        shutil.copyfile(path, src)
    else:
        con = sqlite3.connect(src)
        con.execute("CREATE TABLE sessions(id TEXT)")
        con.execute("INSERT INTO sessions VALUES ('x')")
        con.commit()
        con.close()
    r = subprocess.run([shell, str(src), ".recover"], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    # INSERT [OR IGNORE] INTO 'sessions'(...) VALUES(...): a row of the table really came back
    works = r.returncode == 0 and any(ln.startswith("INSERT") and "sessions" in ln.split("VALUES")[0]
                                      for ln in r.stdout.splitlines())
    return "works" if works else "fails"
