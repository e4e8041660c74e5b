"""fleetops as an operator installs it: a wheel built from the checkout, installed into a fresh venv
on the oldest Python the README claims, run from a directory that is not the checkout.

The wheel is built from a copy of the checkout's files (tracked and untracked-but-not-ignored, as
`git ls-files -co --exclude-standard` lists them), so the build leaves nothing in the checkout and a
file missing from the package data is missing here too.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tarfile
import io
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]
OLDEST = (3, 9)         # pyproject's requires-python; the README says the same


def oldest_python() -> str | None:
    """An interpreter of the oldest claimed controller version: FLEETOPS_OLDEST_PYTHON, pyenv, PATH."""
    want = "%d.%d" % OLDEST
    cands = [os.environ.get("FLEETOPS_OLDEST_PYTHON")]
    cands += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{want}.*/bin/python3")))
    cands += [shutil.which(f"python{want}")]
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    return None


def _checkout_copy(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:          # keeps the package's symlinks as symlinks
        for f in files:
            if f and os.path.lexists(ROOT / f):
                tar.add(str(ROOT / f), arcname=f, recursive=False)
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        tar.extractall(dest)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    _checkout_copy(src)
    out = tmp_path_factory.mktemp("dist")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    wheels = list(out.glob("fleetops-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


class Installed:
    """The installed `fleetops` command, run from `cwd` (never the checkout), without PYTHONPATH."""

    def __init__(self, venv: Path, cwd: Path, python: str):
        self.venv, self.cwd, self.python = venv, cwd, python
        self.bin = venv / "bin" / "fleetops"

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FLEETOPS_DEBUG", "PYTHONHOME")}
        env.update(COLUMNS="200", PATH=f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
        return env

    def __call__(self, *args, timeout=900) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.bin), *map(str, args)], cwd=self.cwd, env=self.env(),
                              capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def installed(wheel, tmp_path_factory) -> Installed:
    python = oldest_python()
    if python is None:
        pytest.fail(f"no Python {OLDEST[0]}.{OLDEST[1]} found (pyenv, PATH or FLEETOPS_OLDEST_PYTHON): the "
                    "README claims it, so the installed package must be tested on it")
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([python, "-m", "venv", str(venv)], check=True, timeout=300)
    r = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    cwd = tmp_path_factory.mktemp("elsewhere")
    assert ROOT not in cwd.parents and cwd != ROOT
    return Installed(venv, cwd, python)


def checkout_fleetops(*args, cwd, timeout=900) -> subprocess.CompletedProcess:
    """The same command from the checkout (`python -m fleetops` of the test venv), for comparison."""
    env = {k: v for k, v in os.environ.items() if k != "FLEETOPS_DEBUG"}
    env.update(COLUMNS="200", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "fleetops", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
