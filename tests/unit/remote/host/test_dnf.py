"""The dnf payload's reading of `dnf --assumeno`'s transaction table (dnf 4's layout) and what it
refuses before dnf runs. What it decides on a real dnf is tests/lab/compat/test_dnf_oracle.py."""
from __future__ import annotations

import pytest

from fleetops.remote.host import dnf

TABLE = """Last metadata expiration check: 0:00:02 ago on Tue Dec  1 18:39:56 2026.
Dependencies resolved.
================================================================================
 Package                Architecture     Version         Repository        Size
================================================================================
Removing:
 fotest-lib             noarch           3.0-1           @fotest           4
Removing dependent packages:
 fotest-app             noarch           3.0-1           @fotest           4
Upgrading:
 fotest-hello           noarch           1.1-1           fotest           6.0 k
Installing dependencies:
 fotest-dep             x86_64           1:2.0-3         fotest           7.0 k

Transaction Summary
================================================================================
Remove   2 Packages
Operation aborted.
"""


def test_the_transaction_table_is_read_by_section():
    add, drop = dnf.planned(TABLE)
    assert add == ["fotest-hello-1.1-1.noarch", "fotest-dep-1:2.0-3.x86_64"]
    assert drop == ["fotest-lib-3.0-1.noarch", "fotest-app-3.0-1.noarch"]


def test_nothing_planned_when_nothing_to_do():
    assert dnf.planned("Dependencies resolved.\nNothing to do.\nComplete!\n") == ([], [])


def test_a_change_without_root_is_refused_first(monkeypatch):
    monkeypatch.setattr(dnf.os, "geteuid", lambda: 1000)      # the suite runs as root
    monkeypatch.setattr(dnf, "_run", lambda argv: pytest.fail(f"ran {argv}"))
    got = dnf.main(["x"], "present", {}, check=False)
    assert got["failed"] and got["msg"] == "This command has to be run under the root user."


def test_options_for_the_repositories_and_release():
    assert dnf.options({"disable_gpg_check": True, "enablerepo": "a,b", "disablerepo": ["c"],
                        "releasever": "9", "installroot": "/mnt/x"}) == [
        "--nogpgcheck", "--disablerepo=c", "--enablerepo=a", "--enablerepo=b", "--releasever=9", "--installroot=/mnt/x"]
