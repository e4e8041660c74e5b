"""Shared fixtures: a session-wide lab of real sshd hosts (root only) and a per-test home cleaner.

FLEETOPS_LAB_HOSTS (default 8) sets the lab size; FLEETOPS_LAB_PREFIX (default
"fotest") the Unix user prefix, so two suites running at once on one machine can
use separate users.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from fleetops.lab import Lab


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: needs the local sshd lab (root)")


@pytest.fixture(scope="session")
def lab():
    """A Lab with `.hosts`, `.inventory_path`, `.known_hosts_path`, `.key_path`; torn down by PID."""
    if os.geteuid() != 0:
        pytest.skip("the sshd lab needs root (it creates Unix users and runs sshd); run the tests with sudo")
    n = int(os.environ.get("FLEETOPS_LAB_HOSTS", "8"))
    prefix = os.environ.get("FLEETOPS_LAB_PREFIX", "fotest")
    state_dir = tempfile.mkdtemp(prefix="fleetops-lab-")
    the_lab = Lab(state_dir, prefix=prefix)
    try:
        the_lab.up(n)
        yield the_lab
    finally:
        the_lab.down()
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture
def lab_clean(lab):
    """Wipe ~/.hermes and ~/.fleetops* leftovers in every lab home (never ~/.ssh) before the test."""
    lab.clean((".hermes", ".fleetops*"))
    return lab
