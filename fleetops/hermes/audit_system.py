"""What each audited host is (architecture, OS and release, kernel, Python, SQLite): read from the
audit payload's host_tooling.system, shown in the fleet table, stored per run and host.

Why: an operator must see which hosts are the aarch64 ones, or which run Debian 12's SQLite 3.40.1
(whose FTS5 and `.recover` behave differently), without logging into each.
"""
from __future__ import annotations

SYSTEM_DDL = """
CREATE TABLE IF NOT EXISTS audit_system (
    run_id TEXT NOT NULL,
    host TEXT NOT NULL,
    arch TEXT,
    os_id TEXT,
    os_version TEXT,
    os_name TEXT,
    kernel TEXT,
    python TEXT,
    sqlite_version TEXT,
    PRIMARY KEY (run_id, host)
)
"""
FIELDS = ("arch", "os_id", "os_version", "os_name", "kernel", "python", "sqlite")


def system_of(res: dict | None) -> dict | None:
    """{arch, os_id, os_version, os_name, kernel, python, sqlite} from one host's audit result."""
    s = ((res or {}).get("host_tooling") or {}).get("system")
    if not isinstance(s, dict):
        return None
    os_ = s.get("os") if isinstance(s.get("os"), dict) else {}
    return {"arch": s.get("arch"), "os_id": os_.get("id"), "os_version": os_.get("version"),
            "os_name": os_.get("name"), "kernel": s.get("kernel"), "python": s.get("python"),
            "sqlite": s.get("sqlite")}


def arch_text(r: dict) -> str:
    return str((r.get("system") or {}).get("arch") or "-")


def system_text(r: dict) -> str:
    """`debian 12, kernel 6.1.0-18-arm64, Python 3.11.2, SQLite 3.40.1` (or "-" when not recorded)."""
    s = r.get("system") or {}
    if not any(s.values()):
        return "-"
    osv = " ".join(str(x) for x in (s.get("os_id"), s.get("os_version")) if x) or "?"
    return "%s, kernel %s, Python %s, SQLite %s" % (osv, s.get("kernel") or "?", s.get("python") or "?",
                                                   s.get("sqlite") or "?")


def store_system(c, run_id: str, results: dict) -> None:
    c.execute(SYSTEM_DDL)
    for host, res in results.items():
        s = system_of(res)
        if s:
            c.execute("INSERT OR REPLACE INTO audit_system VALUES (?,?,?,?,?,?,?,?,?)",
                      (run_id, host) + tuple(s[k] for k in FIELDS))


def load_system(conn, run_id: str | None = None) -> dict:
    """{(run_id, host): system} of the stored audits (one run's, or all)."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name='audit_system'").fetchone() is None:
        return {}
    out = {}
    for rec in conn.execute("SELECT run_id, host, %s FROM audit_system" % ", ".join(
            "sqlite_version" if k == "sqlite" else k for k in FIELDS)):
        if run_id is None or rec[0] == run_id:
            out[(rec[0], rec[1])] = dict(zip(FIELDS, rec[2:]))
    return out
