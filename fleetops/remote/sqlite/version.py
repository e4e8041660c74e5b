"""Payload: the host's Python and SQLite versions (the cheapest useful round trip).

Used by the fleet-overhead benchmark and handy as a smoke test of a host.
"""
from __future__ import annotations

import sqlite3
import sys


def main(args: dict) -> dict:
    return {
        "changed": False, "failed": False, "skipped": False,
        "msg": "SQLite %s" % sqlite3.sqlite_version,
        "sqlite_version": sqlite3.sqlite_version,
        "python_version": sys.version.split()[0],
    }
