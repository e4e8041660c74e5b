"""The journal mode a store is in, against the one Hermes would pick on this host's SQLite.

Why: SQLite 3.7.0 up to 3.51.2 (except the 3.44.6+ and 3.50.7+ backports) has the WAL-reset
bug, which can corrupt a WAL database written by several processes. Hermes 0.20.1 and later
create stores in DELETE mode on such a SQLite but keep a store they find in WAL as it is, so a
store in WAL there (made by 0.19.0, or switched by a tool) stays exposed until an operator acts.
The SQLite is the one this payload's Python links, usually the same library as Hermes' venv.
Stdlib only, Python 3.8+.
"""
import sqlite3
import sys

WAL_RESET_BUG = "3.7.0 to 3.51.2, except 3.44.6+ and 3.50.7+"


def wal_reset_vulnerable(version_info):
    """Whether this SQLite version (a tuple) has the WAL-reset bug."""
    v = tuple(int(x) for x in version_info[:3])
    if v < (3, 7, 0) or v >= (3, 51, 3):
        return False
    return not ((3, 50, 7) <= v < (3, 51, 0) or (3, 44, 6) <= v < (3, 45, 0))


def advice(header_mode, version_info=None):
    """{mode, sqlite_version, wal_reset_bug, hermes_new_store_mode, warning?} for a store whose
    header says `header_mode` ("wal" or "rollback")."""
    info = tuple(version_info or sqlite3.sqlite_version_info)
    bug = wal_reset_vulnerable(info)
    mode = "wal" if header_mode == "wal" else "delete"
    out = {"mode": mode, "sqlite_version": ".".join(str(x) for x in info[:3]),
           "sqlite_of": sys.executable, "wal_reset_bug": bug,
           # Hermes >= 0.20.1: DELETE for a new store on a SQLite with the bug, else WAL; a store
           # found in WAL stays WAL (0.19.0 always picks WAL)
           "hermes_new_store_mode": "delete" if bug else "wal"}
    if mode == "wal" and bug:
        out["warning"] = ("store runs WAL on SQLite %s, which has the WAL-reset bug (%s): Hermes "
                          "0.20.1+ would make it DELETE but keeps it WAL as found; set "
                          "database.journal_mode: delete in its config.yaml and restart it, or "
                          "upgrade SQLite" % (out["sqlite_version"], WAL_RESET_BUG))
    return out
