"""scripts/setup.sh is what a fresh CI machine runs: every program the tests call must be
installed by it. Checked by hiding programs from it (a PATH of links to everything else)."""
from __future__ import annotations

import os
import subprocess

import pytest
from tests.support.paths import REPO

ROOT = REPO


def _would_install(tmp_path, hide) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            link = bin_dir / name
            if name not in hide and not link.exists() and not link.is_symlink():
                link.symlink_to(os.path.join(d, name))
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "FLEETOPS_SETUP_DRY_RUN": "1",
           "FLEETOPS_VENV": str(tmp_path / "venv")}
    p = subprocess.run(["/bin/bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("setup: would install: ")]
    return line.split(": ", 2)[2].split()


@pytest.mark.parametrize("hide,package", [({"pgrep"}, "procps"), ({"ps"}, "procps"),
                                          ({"flock"}, "util-linux"), ({"sqlite3"}, "sqlite3"),
                                          ({"crontab"}, "cron")])
def test_setup_installs_what_the_tests_call(tmp_path, hide, package):
    assert package in _would_install(tmp_path, hide)


def test_nothing_missing_here_means_nothing_installed(tmp_path):
    assert "procps" not in _would_install(tmp_path, set())
