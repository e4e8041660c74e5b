"""scripts/setup.sh is what a fresh CI machine runs: every program the tests call must be
installed by it. Checked by hiding programs from it (a PATH of links to everything else)."""
from __future__ import annotations

import os
import subprocess

import pytest
from tests.support.paths import REPO

ROOT = REPO


def _would_install(tmp_path, hide, setup_for=None) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for d in ("/usr/local/bin", "/usr/bin", "/usr/sbin", "/bin", "/sbin"):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            link = bin_dir / name
            if name not in hide and not link.exists() and not link.is_symlink():
                link.symlink_to(os.path.join(d, name))
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "FLEETOPS_SETUP_DRY_RUN": "1",
           "FLEETOPS_VENV": str(tmp_path / "venv")}
    if setup_for:
        env["FLEETOPS_SETUP_FOR"] = setup_for
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


# What only the tests call: the demo (scripts/demo.sh, FLEETOPS_SETUP_FOR=demo) installs none of it.
TEST_ONLY = [({"chromium"}, "chromium"), ({"crontab"}, "cron"), ({"systemd-nspawn"}, "systemd-container"),
             ({"dnf"}, "dnf"), ({"sudo"}, "sudo")]


@pytest.mark.parametrize("hide,package", TEST_ONLY)
def test_the_demo_installs_nothing_only_the_tests_need(tmp_path, hide, package):
    assert package in _would_install(tmp_path / "t", hide)
    assert package not in _would_install(tmp_path / "d", hide, setup_for="demo")


@pytest.mark.parametrize("hide,package", [({"sqlite3"}, "sqlite3"), ({"ssh-keygen"}, "openssh-client"),
                                          ({"pgrep"}, "procps"), ({"runuser"}, "util-linux")])
def test_the_demo_installs_what_it_runs(tmp_path, hide, package):
    assert package in _would_install(tmp_path, hide, setup_for="demo")
