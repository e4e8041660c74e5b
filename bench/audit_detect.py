#!/usr/bin/env python3
"""What the audit sees of damage nobody chose, beside SQLite's own checks, on seeded copies.

A store is written by Hermes' own SessionDB (tests/corpus/build.py, its own seed). Each copy gets
1-4 bit flips, each in a random page of a random kind (table leaf, index, FTS shadow table,
overflow; page 1, the header, never), all chosen from the copy's seed. A copy is *harmful* when
a reader would see a difference: a row of any table (FTS shadow tables included) read by a table
scan differs from the source or cannot be read, an index's entries differ from the source's, or
integrity_check objects. Each copy is then judged by `fleetops inspect` (the audit's default),
`inspect --deep`, PRAGMA quick_check and integrity_check on this interpreter's SQLite and, where
pysqlite3 is installed, on its newer SQLite (and the audit under it).

    python3 bench/audit_detect.py [--copies 60] [--healthy 40] [--seed 3600] [--sessions 40]

Prints one line per copy, then the table: harmful copies each check sees, of those the ones
this SQLite's integrity_check sees, the content-only ones (harmful, unseen by integrity_check),
and false alarms (copies a check objects to that are not harmful: --healthy more copies get their
flips only in pages' unallocated gaps, which nothing reads, and the oracle confirms each harmless).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from fleetops.remote.hermes import audit as hermes_audit  # noqa: E402

try:
    import pysqlite3.dbapi2 as newer  # noqa: E402
except ImportError:  # pragma: no cover - the row is left out and the output says so
    newer = None

KINDS = ("table leaf", "index", "fts shadow", "overflow")


def source(path: str, sessions: int, seed: int) -> str:
    """The bench's own store, by the real SessionDB (cached by build.py)."""
    from tests.corpus import build
    build.realistic_db(path, sessions=sessions, messages_per_session=(60, 150), seed=seed, deleted=4)
    return path


def page_kinds(db: str) -> dict:
    """{kind: [page numbers]} from dbstat (page 1 excluded)."""
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % db, uri=True)
    try:
        objs = dict(con.execute("SELECT name, type FROM sqlite_master"))
        out = dict((k, []) for k in KINDS)
        for name, pgno, ptype in con.execute("SELECT name, pageno, pagetype FROM dbstat"):
            if pgno == 1:
                continue
            if ptype == "overflow":
                out["overflow"].append(pgno)
            elif "_fts" in name and objs.get(name) == "table":
                out["fts shadow"].append(pgno)
            elif objs.get(name) == "index" or name.startswith("sqlite_autoindex"):
                out["index"].append(pgno)
            elif ptype == "leaf":
                out["table leaf"].append(pgno)
        return out
    finally:
        con.close()


def damage(src: str, out: str, seed: int, kinds: dict, page_size: int) -> list:
    """Copy `src` to `out` with 1-4 flipped bits; [(kind, page, byte offset in page, bit)]."""
    rng = random.Random(seed)
    shutil.copyfile(src, out)
    flips = []
    with open(out, "r+b") as f:
        for _ in range(rng.randint(1, 4)):
            kind = rng.choice([k for k in KINDS if kinds[k]])
            pgno = rng.choice(kinds[kind])
            off, bit = rng.randrange(page_size), rng.randrange(8)
            f.seek((pgno - 1) * page_size + off)
            b = f.read(1)[0]
            f.seek((pgno - 1) * page_size + off)
            f.write(bytes([b ^ (1 << bit)]))
            flips.append((kind, pgno, off, bit))
    return flips


def harmless(src: str, out: str, seed: int, kinds: dict, page_size: int) -> list:
    """Copy `src` to `out` with 1-4 bits flipped in the unallocated gap of b-tree pages (between
    the cell pointer array and the cell content), which no reader and no check ever reads."""
    rng = random.Random(seed)
    shutil.copyfile(src, out)
    flips = []
    with open(out, "r+b") as f:
        pages = [p for k in ("table leaf", "index", "fts shadow") for p in kinds[k]]
        while len(flips) < rng.randint(1, 4):
            pgno = rng.choice(pages)
            f.seek((pgno - 1) * page_size)
            page = f.read(page_size)
            head = 12 if page[0] in (2, 5) else 8
            cells = int.from_bytes(page[3:5], "big")
            start = int.from_bytes(page[5:7], "big") or 65536
            gap = (head + 2 * cells, min(start, page_size))
            if gap[1] - gap[0] < 1 or page[0] not in (2, 5, 10, 13):
                continue
            off, bit = rng.randrange(*gap), rng.randrange(8)
            f.seek((pgno - 1) * page_size + off)
            f.write(bytes([page[off] ^ (1 << bit)]))
            flips.append(("unallocated", pgno, off, bit))
    return flips


def contents(db: str) -> dict:
    """Every table's rows by table scan and every index's entries through it; an unreadable one
    is its error message."""
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % db, uri=True)
    out = {}
    try:
        objs = con.execute("SELECT type, name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index') "
                           "AND sql IS NOT NULL OR name LIKE 'sqlite_autoindex%'").fetchall()
    except sqlite3.Error as exc:
        return {"schema": "error: %s" % exc}
    for typ, name, tbl in objs:
        q = '"%s"' % tbl.replace('"', '""')
        try:
            if typ == "table":
                if con.execute("SELECT sql FROM sqlite_master WHERE name=?", (name,)).fetchone()[0] \
                        .upper().startswith("CREATE VIRTUAL"):
                    continue
                sql = "SELECT * FROM %s NOT INDEXED" % q
            else:
                cols = ["rowid" if c == -1 else ('"%s"' % n if n else None)
                        for _s, c, n, _d, _co, _k in con.execute('PRAGMA index_xinfo("%s")' % name)]
                m = re.search(r"\)\s*WHERE\s+(.*)$", con.execute("SELECT sql FROM sqlite_master WHERE name=?",
                                                                 (name,)).fetchone()[0] or "", re.I | re.S)
                w = " WHERE " + m.group(1) if m else ""
                sql = 'SELECT %s FROM %s INDEXED BY "%s"%s' % (", ".join(c for c in cols if c), q, name, w)
            out[name] = hash(tuple(con.execute(sql).fetchall()))
        except sqlite3.Error as exc:
            out[name] = "error: %s" % exc
    con.close()
    return out


def pragma(mod, db: str, name: str) -> bool:
    """True when PRAGMA `name` objects (or cannot run)."""
    try:
        con = mod.connect("file:%s?mode=ro&immutable=1" % db, uri=True)
        try:
            rows = con.execute("PRAGMA %s(1000000)" % name).fetchall()
        finally:
            con.close()
        return rows != [("ok",)]
    except mod.Error:
        return True


def audit(db: str, deep: bool = False) -> tuple:
    res = hermes_audit.main({"db_path": db, "holders": False, "tooling": False, "deep": deep})
    rec = res["databases"][0]
    return rec["verdict"] != "healthy", rec["verdict"], (rec["reasons"] or [""])[0]


def audit_newer(paths: list) -> dict:
    """{path: audit verdict} under pysqlite3's SQLite, in a child (the module swap is per process)."""
    out = subprocess.run([sys.executable, "-m", "tests.support.newer_sqlite"] + paths, cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return dict((p, r.get("verdict")) for p, r in json.loads(out)["records"].items())


def run(copies: int, seed: int, sessions: int, work: str, log=print, healthy: int = 0, other=True) -> dict:
    """Judge `copies` damaged copies and `healthy` harmless ones; {"rows": {check: {...}}, "copies": [...]}.
    `other`: the newer SQLite's rows too, where pysqlite3 is installed."""
    newer_ = newer if other else None
    src = source(os.path.join(work, "src", "state.db"), sessions, seed)
    page_size = sqlite3.connect("file:%s?mode=ro&immutable=1" % src, uri=True).execute("PRAGMA page_size").fetchone()[0]
    kinds = page_kinds(src)
    truth = contents(src)
    checks = ["inspect", "inspect --deep", "quick_check %s" % sqlite3.sqlite_version,
              "integrity_check %s" % sqlite3.sqlite_version]
    if newer_ is not None:
        checks += ["quick_check %s" % newer_.sqlite_version, "integrity_check %s" % newer_.sqlite_version,
                   "inspect, SQLite %s" % newer_.sqlite_version]
    results = []
    for i in range(copies + healthy):
        d = os.path.join(work, "c%03d" % i)
        os.makedirs(d, exist_ok=True)
        db = os.path.join(d, "state.db")
        flips = (damage if i < copies else harmless)(src, db, seed * 1000 + i, kinds, page_size)
        got = contents(db)
        differs = sorted(k for k in set(truth) | set(got) if truth.get(k) != got.get(k))
        seen = {}
        seen[checks[0]], verdict, reason = audit(db)
        seen[checks[1]] = audit(db, deep=True)[0]
        seen[checks[2]] = pragma(sqlite3, db, "quick_check")
        seen[checks[3]] = pragma(sqlite3, db, "integrity_check")
        if newer_ is not None:
            seen[checks[4]] = pragma(newer_, db, "quick_check")
            seen[checks[5]] = pragma(newer_, db, "integrity_check")
        harmful = bool(differs) or seen[checks[3]]
        results.append({"db": db, "flips": flips, "differs": differs, "harmful": harmful, "seen": seen,
                        "verdict": verdict, "reason": reason})
        log("%3d %-5s %-22s %-50s %s" % (i, "harm" if harmful else "-", verdict, ",".join(differs)[:50],
                                           "; ".join("%s p%d" % (k, p) for k, p, _o, _b in flips)))
    if newer_ is not None:
        by = audit_newer([r["db"] for r in results])
        for r in results:
            r["seen"][checks[6]] = by.get(r["db"]) != "healthy"
    integ = checks[3]
    rows = {}
    for c in checks:
        h = [r for r in results if r["harmful"]]
        rows[c] = {"seen": sum(r["seen"][c] for r in h),
                   "of_integrity": sum(r["seen"][c] for r in h if r["seen"][integ]),
                   "content_only": sum(r["seen"][c] for r in h if not r["seen"][integ]),
                   "false_alarms": sum(r["seen"][c] for r in results if not r["harmful"])}
    return {"checks": checks, "rows": rows, "copies": results,
            "harmful": sum(r["harmful"] for r in results),
            "integrity": sum(r["harmful"] and r["seen"][integ] for r in results)}


def table(res: dict) -> str:
    h, i = res["harmful"], res["integrity"]
    lines = ["| check | harmful copies seen (of %d) | of those integrity_check %s sees (%d) | content-only (%d) "
             "| false alarms (of %d harmless) |" % (h, sqlite3.sqlite_version, i, h - i, len(res["copies"]) - h),
             "|---|---|---|---|---|"]
    for c in res["checks"]:
        r = res["rows"][c]
        lines.append("| %s | %d | %d | %d | %d |" % (c, r["seen"], r["of_integrity"], r["content_only"],
                                                     r["false_alarms"]))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=60)
    ap.add_argument("--seed", type=int, default=3600)
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--healthy", type=int, default=40,
                    help="more copies whose flips are all in pages' unallocated gaps (harmless by construction)")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="fleetops-detect-")
    try:
        res = run(args.copies, args.seed, args.sessions, work, healthy=args.healthy)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("python %s, SQLite %s%s; %d damaged copies + %d with flips in unallocated gaps, seed %d, %d sessions" % (
        sys.version.split()[0], sqlite3.sqlite_version,
        ", pysqlite3 %s" % newer.sqlite_version if newer else " (pysqlite3 not installed: no newer SQLite row)",
        args.copies, args.healthy, args.seed, args.sessions))
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
