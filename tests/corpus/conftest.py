"""Fixtures for the Hermes state.db corpus: one cached realistic build, copied per test."""
from __future__ import annotations

import pytest

from . import build, damage


@pytest.fixture(scope="session")
def hermes_venv():
    """Skip (with the remedy) when the hermes-agent test venv is absent."""
    try:
        return build.venv_python()
    except build.HermesVenvMissing as exc:
        pytest.skip(f"{exc} (creates /opt/fleetops-test/hermes-venv with hermes-agent==0.19.0)")


@pytest.fixture(scope="session")
def standard_meta(hermes_venv, tmp_path_factory):
    """Build (or reuse from /var/tmp/fleetops-corpus-cache) the STANDARD database once per session."""
    return build.realistic_db(tmp_path_factory.mktemp("std") / "state.db", **build.STANDARD)


@pytest.fixture(scope="session")
def pristine_db(standard_meta, tmp_path_factory):
    """A session-wide read-only reference copy (never damage it: use hermes_db for that)."""
    p = tmp_path_factory.mktemp("pristine") / "state.db"
    build.realistic_db(p, **build.STANDARD)
    return p


@pytest.fixture
def hermes_db(standard_meta, tmp_path):
    """A fresh copy of the cached 40-session realistic state.db in tmp_path."""
    p = tmp_path / "hermes" / "state.db"
    build.realistic_db(p, **build.STANDARD)
    return p


@pytest.fixture
def damaged(pristine_db, tmp_path):
    """Factory: damaged("garbage_leaf_pages") -> Damage for a fresh damaged copy under tmp_path."""
    def make(name: str) -> damage.Damage:
        return damage.make(name, pristine_db, tmp_path / name / "state.db")
    return make
