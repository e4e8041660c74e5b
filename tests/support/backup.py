"""Fixtures for the backup-unit tests: real Hermes state.db files and the job run as a real process."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.corpus import build

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "fleetops" / "remote" / "hermes" / "backup.py"


@pytest.fixture(scope="session")
def corpus_ok():
    try:
        build.venv_python()
    except build.HermesVenvMissing as exc:
        pytest.skip(f"{exc} (scripts/hermes-venv.sh creates it)")


@pytest.fixture
def profile(corpus_ok, tmp_path) -> Path:
    """A Hermes profile dir holding a realistic 0.19.0 state.db whose last conversation is only in the WAL."""
    p = tmp_path / "home" / ".hermes"
    build.realistic_db(p / "state.db", **build.STANDARD, keep_wal=True)
    assert (p / "state.db-wal").stat().st_size > 0     # the copy must pick the WAL up, not just the file
    return p


def run_job(*args, env=None) -> subprocess.CompletedProcess:
    """The job as cron/systemd run it: a separate python3 process on the script file."""
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600)


def backups_in(dest: Path) -> list[Path]:
    return sorted(p for p in dest.glob("state-*.db"))


def manifest_of(db: Path) -> dict:
    return json.loads(db.with_suffix(".json").read_text())


def counts(path, uri_ro=True) -> dict:
    """Row counts of the tables a salvage cares about, read through SQLite (WAL included)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True) if uri_ro else sqlite3.connect(path)
    try:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("sessions", "messages", "messages_fts")}
    finally:
        conn.close()


def integrity(path) -> list:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()


def ensure_command(command: str, package: str) -> str:
    """Path of `command`, installing the Debian `package` first when it is missing (root only)."""
    import shutil
    path = shutil.which(command)
    if path:
        return path
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip(f"{command} is missing and cannot be installed here (apt-get install {package} as root)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        r = subprocess.run(install, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            pytest.fail(f"apt-get install {package} failed: {r.stderr.strip().splitlines()[-1:]}")
    path = shutil.which(command)
    assert path, f"{package} installed but {command} is still not on PATH"
    return path


@pytest.fixture(scope="session")
def crontab_cmd():
    return ensure_command("crontab", "cron")


@pytest.fixture(scope="session")
def systemd_analyze():
    return ensure_command("systemd-analyze", "systemd")
