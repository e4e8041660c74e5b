"""The audit reports each store's journal mode against the one Hermes picks on the host's SQLite,
and warns when a store runs WAL on a SQLite with the WAL-reset bug."""
from __future__ import annotations

import sqlite3

import pytest

from fleetops.hermes.audit import rows_from
from fleetops.remote.hermes import audit as hermes_audit
from fleetops.remote.hermes import journal as hermes_journal
from tests.support import hermes_matrix
from tests.corpus import build


@pytest.mark.parametrize("version,bug", [
    ((3, 6, 23), False), ((3, 7, 0), True), ((3, 40, 1), True), ((3, 44, 5), True), ((3, 44, 6), False),
    ((3, 44, 9), False), ((3, 45, 0), True), ((3, 50, 6), True), ((3, 50, 7), False), ((3, 51, 0), True),
    ((3, 51, 2), True), ((3, 51, 3), False), ((3, 52, 0), False)])
def test_wal_reset_bug_versions(version, bug):
    assert hermes_journal.wal_reset_vulnerable(version) is bug


def test_advice():
    a = hermes_journal.advice("wal", (3, 40, 1))
    assert a["mode"] == "wal" and a["hermes_new_store_mode"] == "delete" and "WAL-reset bug" in a["warning"]
    assert "database.journal_mode: delete" in a["warning"]
    assert "warning" not in hermes_journal.advice("rollback", (3, 40, 1))
    b = hermes_journal.advice("wal", (3, 51, 3))
    assert b["hermes_new_store_mode"] == "wal" and "warning" not in b


@pytest.mark.parametrize("version", hermes_matrix.ALL)
def test_store_of_each_version_on_this_host(version, tmp_path):
    """0.19.0 makes WAL stores, 0.20.1 DELETE ones on a SQLite with the bug: the audit says which,
    what Hermes would pick here, and warns only for WAL on a SQLite with the bug."""
    try:
        build.venv_python(version)
    except build.HermesVenvMissing as exc:
        pytest.skip(str(exc))
    db = tmp_path / "state.db"
    build.standard_db(db, hermes=version)
    res = hermes_audit.main({"db_path": str(db), "tooling": False, "holders": False})
    rec = res["databases"][0]
    with open(db, "rb") as fh:
        on_disk = "wal" if fh.read(20)[18] == 2 else "delete"
    j = rec["journal"]
    bug = hermes_journal.wal_reset_vulnerable(sqlite3.sqlite_version_info)
    assert j["mode"] == on_disk and j["wal_reset_bug"] is bug
    assert j["hermes_new_store_mode"] == ("delete" if bug else "wal")
    codes = [w["code"] for w in rec["warnings"]]
    assert ("wal_reset_bug" in codes) is (on_disk == "wal" and bug)
    row = rows_from({"h1": res})[0]
    assert row["journal"].startswith(on_disk)
    if bug and version != hermes_matrix.OLDEST:   # a newer Hermes on this SQLite made it DELETE
        assert on_disk == "delete" and row["journal"] == "delete"
