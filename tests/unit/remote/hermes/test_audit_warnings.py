"""The audit's warnings on real stores and real conditions: no verified backup within 26 h (the
backup made by the real backup job, then aged by a faked clock), a WAL above 64 MB (real
uncheckpointed commits held open by a live connection), and free space under twice the file
(a real, small tmpfs). Warnings never change the verdict."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import time

import pytest

from fleetops.remote.hermes import audit as hermes_audit
from fleetops.remote.hermes import backup as hermes_backup
from tests.corpus import build


def _audit(home):
    res = hermes_audit.main({"hermes_home": str(home), "tooling": False, "services": False, "holders": False})
    assert res["failed"] is False, res.get("msg")
    (rec,) = res["databases"]
    return rec, {w["code"]: w["msg"] for w in rec["warnings"]}


@pytest.fixture
def home(tmp_path, standard_src):
    h = tmp_path / ".hermes"
    build.copy_image(standard_src, h / "state.db")
    return h


def test_no_verified_backup_then_a_fresh_one_then_27_hours_later(home, monkeypatch):
    rec, warns = _audit(home)
    assert rec["verdict"] == "healthy" and warns["no_verified_backup"] == "no verified backup found"
    out = hermes_backup.backup_profile(str(home))
    assert out["rc"] == hermes_backup.RC_OK, out["msg"]
    rec, warns = _audit(home)
    assert "no_verified_backup" not in warns and rec["backups"]["newest_verified"]["age_hours"] < 1
    real = time.time
    monkeypatch.setattr(hermes_audit.time, "time", lambda: real() + 27 * 3600)
    rec, warns = _audit(home)
    assert rec["verdict"] == "healthy"
    assert warns["no_verified_backup"].startswith("newest verified backup is 27.0 h old (> 26 h)")
    monkeypatch.setattr(hermes_audit.time, "time", lambda: real() + 25 * 3600)
    assert "no_verified_backup" not in _audit(home)[1]


def test_wal_above_64_mb_is_warned_about(home):
    con = sqlite3.connect(str(home / "state.db"))
    try:
        assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
        con.execute("PRAGMA wal_autocheckpoint=0")
        rec, warns = _audit(home)
        assert "wal_large" not in warns
        while os.path.getsize(str(home / "state.db-wal")) <= 64 * 1024 * 1024:
            con.execute("UPDATE messages SET content = content || ''")   # every page rewritten, never checkpointed
            con.commit()
        rec, warns = _audit(home)
        size_mb = os.path.getsize(str(home / "state.db-wal")) / 1048576.0
        assert warns["wal_large"] == "WAL is %.1f MB (> 64 MB): a checkpoint is not keeping up" % size_mb
        assert rec["verdict"] == "healthy"
    finally:
        con.close()


@pytest.fixture
def small_fs(tmp_path):
    """A real tmpfs just big enough for the store (root only: the suite runs as root)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_free_space_under_twice_the_file_is_warned_about(home, small_fs, standard_src):
    rec, warns = _audit(home)                      # on the test's own disk: room enough
    assert "low_free_space" not in warns
    tight = small_fs / ".hermes"
    build.copy_image(standard_src, tight / "state.db")
    st = os.statvfs(str(tight))
    free = st.f_bavail * st.f_frsize
    size = sum(os.path.getsize(str(tight / ("state.db" + s))) for s in ("", "-wal")
               if (tight / ("state.db" + s)).exists())
    assert free < 2 * size                         # the condition, measured independently
    rec, warns = _audit(tight)
    assert warns["low_free_space"] == "%.1f MB free, under twice the database (%.1f MB)" % (
        free / 1048576.0, size / 1048576.0)
    assert rec["verdict"] == "healthy"
