"""Fixtures for the audit tests: one realistic Hermes state.db built with the real SessionDB."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.corpus import build


@pytest.fixture(scope="session")
def standard_src():
    """A healthy realistic state.db (hermes-agent 0.19.0), built once; tests copy it, never damage it."""
    d = Path(tempfile.mkdtemp(prefix="fleetops-audit-src-"))
    try:
        build.standard_db(d / "state.db")
    except build.HermesVenvMissing as exc:
        pytest.skip(str(exc))
    yield d / "state.db"
    shutil.rmtree(d, ignore_errors=True)
