"""Runs the audit payload under a newer SQLite than the machine's: pysqlite3-binary's (3.51),
put in the place of the standard `sqlite3` module before the payload imports it.

Debian 12's SQLite 3.40 is what the suite's Python links; hosts on Debian 13 or Ubuntu 24.04 have
3.45+, whose quick_check runs FTS5's own integrity check. The payload is stdlib-only and imports
`sqlite3`, so swapping the module is how one interpreter shows both.

    python -m tests.support.newer_sqlite [--budget GB] PATH... -> JSON: {"sqlite_version", "covers", "records"}
"""
from __future__ import annotations

import json
import sys


def main(paths, extra=None) -> dict:
    import pysqlite3.dbapi2 as newer
    sys.modules["sqlite3"] = newer
    from fleetops.remote.hermes import audit as hermes_audit
    from fleetops.remote.hermes import audit_fts
    records = {}
    for p in paths:
        res = hermes_audit.main(dict({"db_path": p, "tooling": False, "holders": False}, **(extra or {})))
        records[p] = res["databases"][0] if not res["failed"] else {"failed": res.get("msg")}
    return {"sqlite_version": newer.sqlite_version, "covers": audit_fts.quick_check_covers_fts5(),
            "records": records}


if __name__ == "__main__":
    argv = sys.argv[1:]
    extra = {}
    if argv[:1] == ["--budget"]:
        extra["budget_gb"], argv = float(argv[1]), argv[2:]
    json.dump(main(argv, extra), sys.stdout, default=str)
