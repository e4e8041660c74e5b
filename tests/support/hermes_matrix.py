"""The Hermes versions the suite runs against, read from tests/hermes_matrix.txt.

Why one file for the shell and the tests: scripts/hermes-venv.sh installs each version into its
own venv from the same lines the tests read, so a version added there is built on a fresh CI
machine and exercised by every test parametrised over VERSIONS.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MATRIX_FILE = Path(__file__).resolve().parents[1] / "hermes_matrix.txt"
BASE = Path("/opt/fleetops-test")


@dataclass(frozen=True)
class HermesVersion:
    version: str
    requirement: str
    command: str

    @property
    def dist(self) -> str:
        return self.requirement.split("==")[0]

    @property
    def venv(self) -> Path:
        """The venv the corpus builds stores with (the oldest version keeps its historic path)."""
        if self.version == "0.19.0":
            return Path(os.environ.get("FLEETOPS_HERMES_VENV", BASE / "hermes-venv"))
        return BASE / f"hermes-{self.version}-venv"

    @property
    def lab_venv(self) -> Path:
        """The venv lab users run the real gateway from (on the system python, readable by them)."""
        if self.version == "0.19.0":
            return Path(os.environ.get("FLEETOPS_LAB_HERMES_VENV", BASE / "hermes-venv-shared"))
        return self.venv

    @property
    def install_hint(self) -> str:
        return f"PYTHON=/usr/bin/python3 sh scripts/hermes-venv.sh {self.version}"


def _load() -> list:
    out = []
    for line in MATRIX_FILE.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            v, req, cmd = line.split()
            out.append(HermesVersion(v, req, cmd))
    return out


VERSIONS = _load()
BY_VERSION = {v.version: v for v in VERSIONS}
ALL = [v.version for v in VERSIONS]
OLDEST = ALL[0]
NEWER = [v.version for v in VERSIONS[1:]]


def lab_ready(version: str) -> HermesVersion:
    """That version, or a skip naming the command to build its venv (corpus and lab alike)."""
    import pytest
    from tests.corpus import build
    v = get(version)
    try:
        build.venv_python(version)
    except build.HermesVenvMissing as exc:
        pytest.skip(str(exc))
    if not (v.lab_venv / "bin" / "python").exists():
        pytest.skip("Hermes %s has no venv the lab users can run: %s" % (version, v.install_hint))
    return v


def get(version: str) -> HermesVersion:
    try:
        return BY_VERSION[version]
    except KeyError:
        raise KeyError(f"Hermes {version} is not in {MATRIX_FILE.name}") from None


# Hermes 0.22's first gateway start prunes ENDED sessions inactive for 90 days and VACUUMs
# (`sessions.auto_prune`, on by default). The corpus' stores carry fixed, old timestamps, so a
# test that compares a store's rows before and after a run under that gateway turns pruning off
# the way an operator does, in the profile's config.yaml. Older versions ignore the key.
KEEP_HISTORY_CONFIG = "sessions:\n  auto_prune: false\n  auto_archive: false\n"


def keep_history(profile_home) -> Path:
    """Write config.yaml with auto-prune off into a Hermes profile home (unless one is there)."""
    path = Path(profile_home) / "config.yaml"
    if not path.exists():
        path.write_text(KEEP_HISTORY_CONFIG)
        path.chmod(0o600)
    return path
