"""Rows a retired WAL generation committed that the store at the path lacks: found, read, merged.

Why (field: upstream Hermes #101064, #109786): when a live WAL store's sidecars are deleted, every
frame its holder committed since the last checkpoint lives only in that holder's unlinked -wal
inode. Hermes 0.21.2+ halts and copies it into `state.db.retired-wal-<ts>-<pid>/` but never
applies it; stopping the holder without reading it loses those rows for good. Here:
- `capture_open` copies each deleted -wal a holder still has open (through /proc/PID/fd/N, with
  the main file it belongs to) before the holder is stopped, unless Hermes captured that inode;
- `sources` lists Hermes' captures and ours; `merge` replays each one's committed frames over its
  own main image in a private copy (fileformat.wal, never SQLite's recovery on the original) and
  inserts into the repaired copy every row whose primary key it lacks, parents first. A row that
  is there is never touched, so a second run merges nothing twice; rows the copy has and the
  retired generation does not are counted, not deleted (nothing is ever dropped).
Captures are kept, never deleted. Stdlib only, Python 3.8+.
"""
import glob
import os
import sqlite3

from fleetops.remote.hermes import steplib
from fleetops.remote.sqlite.fileformat import wal as wal_format
from fleetops.remote.sqlite.sql import quote_ident

HERMES_SUFFIX = ".retired-wal-"
OURS = "retired-wal"          # under <hermes root>/fleetops/: the captures fleetops made
FTS_SHADOW = ("_data", "_idx", "_content", "_docsize", "_config")
# one message, whatever its id: what a second copy of it (a replayed pending message) shares
DUP_KEY = ("session_id", "role", "timestamp", "content")


def _own_dir(loc):
    return os.path.join(loc["fleetops"], OURS)


def _identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def _hermes_identities(loc):
    """{(dev, ino): capture dir} of the WAL inodes Hermes' own captures already hold."""
    out = {}
    for d in _hermes_dirs(loc):
        man = steplib.read_json(os.path.join(d, "manifest.json")) or {}
        ident = (man.get("wal") or {}).get("identity")
        if isinstance(ident, list) and len(ident) == 2:
            out[tuple(ident)] = d
    return out


def _hermes_dirs(loc):
    return sorted(d for d in glob.glob(loc["db"] + HERMES_SUFFIX + "*")
                  if os.path.isdir(d) and not d.endswith(".partial"))


def capture_open(loc, holders):
    """Copy every deleted -wal a holder keeps open (and the main file) before it is stopped.

    Returns [{pid, fd, dir | already_captured_by | error}]. The copy is ours (0700/0600 under
    the fleetops directory); the holder's descriptor is only read."""
    done = []
    known = _hermes_identities(loc)
    for h in holders or []:
        for r in h.get("retired") or []:
            if r.get("role") != "wal":
                continue
            link = "/proc/%d/fd/%d" % (h["pid"], r["fd"])
            ident = _identity(link)
            rec = {"pid": h["pid"], "fd": r["fd"], "target": r.get("target"), "identity": ident}
            if ident is not None and tuple(ident) in known:
                rec["already_captured_by"] = known[tuple(ident)]
                done.append(rec)
                continue
            d = os.path.join(_own_dir(loc), "%s-%s-pid%d-fd%d" % (
                loc["profile"], steplib.utc_ts(), h["pid"], r["fd"]))
            try:
                steplib.makedirs_private(d + ".partial")
                wal_sha = steplib.copy_private(link, os.path.join(d + ".partial", "state.db-wal"))
                main_sha = steplib.copy_private(loc["db"], os.path.join(d + ".partial", "state.db"))
                man = {"version": 1, "kind": "fleetops-retired-wal", "database": loc["db"],
                       "origin": "open fd %d of PID %d" % (r["fd"], h["pid"]), "pid": h["pid"],
                       "captured_at": steplib.iso(), "trigger": "before stop",
                       "wal": {"identity": ident, "file": "state.db-wal", "sha256": wal_sha,
                               "bytes": os.path.getsize(os.path.join(d + ".partial", "state.db-wal"))},
                       "main": {"mode": "copied", "file": "state.db", "sha256": main_sha,
                                "identity": _identity(loc["db"])}}
                steplib.write_json(os.path.join(d + ".partial", "manifest.json"), man)
                os.rename(d + ".partial", d)
                steplib.fsync_dir(os.path.dirname(d))
                rec["dir"] = d
                known[tuple(ident or ())] = d
            except OSError as exc:
                rec["error"] = "%s: %s" % (type(exc).__name__, exc)
            done.append(rec)
    return done


def sources(loc):
    """Every retired generation kept for this profile: Hermes' captures, then ours, oldest first."""
    out = []
    for origin, dirs in (("hermes", _hermes_dirs(loc)),
                         ("fleetops", sorted(glob.glob(os.path.join(_own_dir(loc), loc["profile"] + "-*"))))):
        for d in dirs:
            if d.endswith(".partial") or not os.path.isdir(d):
                continue
            man = steplib.read_json(os.path.join(d, "manifest.json"))
            if not isinstance(man, dict):
                out.append({"dir": d, "origin": origin, "error": "no readable manifest.json"})
                continue
            wal = os.path.join(d, (man.get("wal") or {}).get("file") or "state.db-wal")
            main = man.get("main") or {}
            main_file = os.path.join(d, main["file"]) if main.get("mode") == "copied" and main.get("file") else None
            out.append({"dir": d, "origin": man.get("origin") or "%s capture (%s, PID %s)" % (
                origin, man.get("trigger"), man.get("pid")), "wal": wal, "main": main_file,
                "main_mode": main.get("mode"), "captured_at": man.get("captured_at")})
    return out


def _view(src, fallback_main, work):
    """A private standalone file: the capture's main image with the WAL's committed frames applied."""
    steplib.makedirs_private(work)
    view = os.path.join(work, "state.db")
    main = src.get("main") or fallback_main
    steplib.copy_private(main, view)
    summary = wal_format.apply_wal(view, src["wal"])
    with open(view, "r+b") as fh:     # the copy stands alone: rollback journal in its header
        fh.seek(18)
        fh.write(b"\x01\x01")
    summary["main_from"] = "capture" if src.get("main") else "the image at the path (the capture kept only its header)"
    return view, summary


def _tables(conn, schema):
    """Ordinary tables (FTS tables, their shadows and sqlite_* excluded), parents before children."""
    rows = conn.execute("SELECT name, sql FROM %s.sqlite_master WHERE type='table'" % schema).fetchall()
    fts = [n for n, sql in rows if sql and sql.upper().startswith("CREATE VIRTUAL TABLE")]
    names = [n for n, _ in rows if not n.startswith("sqlite_") and n not in fts
             and not any(n == f + s for f in fts for s in FTS_SHADOW)]
    parents = {}
    for n in names:
        parents[n] = set(r[2] for r in conn.execute("PRAGMA %s.foreign_key_list(%s)" % (schema, quote_ident(n)))
                         if r[2] != n and r[2] in names)
    ordered, seen = [], set()

    def visit(n, depth=0):
        if n in seen or depth > len(names):
            return
        for p in sorted(parents[n]):
            visit(p, depth + 1)
        seen.add(n)
        ordered.append(n)
    for n in names:
        visit(n)
    return ordered


def _key(conn, schema, table):
    """The columns a row is known by: rowid, or the declared primary key of a WITHOUT ROWID table."""
    sql = conn.execute("SELECT sql FROM %s.sqlite_master WHERE name=?" % schema, (table,)).fetchone()[0] or ""
    if "WITHOUT ROWID" not in sql.upper().replace("\n", " "):
        return ["rowid"], True
    pk = sorted((r[5], r[1]) for r in conn.execute("PRAGMA %s.table_info(%s)" % (schema, quote_ident(table))) if r[5])
    return [quote_ident(c) for _, c in pk], False


def _merge_table(conn, table):
    """Insert src rows whose key main lacks; {merged, conflicts, present, differing, only_in_store}."""
    key, rowid = _key(conn, "main", table)
    cols = [r[1] for r in conn.execute("PRAGMA main.table_xinfo(%s)" % quote_ident(table)) if r[6] in (0, 1)]
    src_cols = set(r[1] for r in conn.execute("PRAGMA src.table_info(%s)" % quote_ident(table)))
    shared = [c for c in cols if c in src_cols]
    t = quote_ident(table)
    k_src = ", ".join("s.%s" % k for k in key)
    join = " AND ".join("m.%s = s.%s" % (k, k) for k in key)
    missing = conn.execute("SELECT %s FROM src.%s AS s NOT INDEXED WHERE NOT EXISTS (SELECT 1 FROM main.%s AS m "
                           "WHERE %s)" % (k_src, t, t, join)).fetchall()
    out = {"merged": 0, "conflicts": 0, "conflict_errors": [], "same_message_present": 0}
    same = None
    if table == "messages" and set(DUP_KEY) <= set(shared):
        same = "SELECT 1 FROM src.messages AS s WHERE %s AND EXISTS (SELECT 1 FROM main.messages AS m WHERE %s)" % (
            " AND ".join("s.%s = ?" % k for k in key), " AND ".join("m.%s IS s.%s" % (c, c) for c in DUP_KEY))
    out["present"] = conn.execute("SELECT count(*) FROM src.%s AS s NOT INDEXED WHERE EXISTS (SELECT 1 FROM main.%s AS m "
                                  "WHERE %s)" % (t, t, join)).fetchone()[0]
    if shared:
        diff = " OR ".join("m.%s IS NOT s.%s" % (quote_ident(c), quote_ident(c)) for c in shared)
        out["differing"] = conn.execute("SELECT count(*) FROM src.%s AS s JOIN main.%s AS m ON %s WHERE %s" % (
            t, t, join, diff)).fetchone()[0]
    out["only_in_store"] = conn.execute("SELECT count(*) FROM main.%s AS m NOT INDEXED WHERE NOT EXISTS (SELECT 1 FROM "
                                        "src.%s AS s WHERE %s)" % (t, t, join)).fetchone()[0]
    collist = ", ".join(quote_ident(c) for c in shared)
    where = " AND ".join("s.%s = ?" % k for k in key)
    ins = "INSERT INTO main.%s(%s%s) SELECT %s%s FROM src.%s AS s WHERE %s" % (
        t, "rowid, " if rowid else "", collist, "s.rowid, " if rowid else "",
        ", ".join("s.%s" % quote_ident(c) for c in shared), t, where)
    for k in missing:
        if same and conn.execute(same, tuple(k)).fetchone():
            out["same_message_present"] += 1      # stored already under another id: never twice
            continue
        conn.execute("SAVEPOINT one")
        try:
            conn.execute(ins, tuple(k))
            conn.execute("RELEASE one")
            out["merged"] += 1
        except sqlite3.IntegrityError as exc:   # a UNIQUE other than the key: the row is there already
            conn.execute("ROLLBACK TO one")
            conn.execute("RELEASE one")
            out["conflicts"] += 1
            if len(out["conflict_errors"]) < 5:
                out["conflict_errors"].append("%s %r: %s" % (table, tuple(k), exc))
    return out


def merge(target_db, srcs, work, fallback_main):
    """Merge every source's rows the target lacks into target_db (a private copy being repaired).

    Returns {"sources": [...], "merged_total", "merged_by_table", "conflicts_total"}: per source
    its origin, the frames replayed, per table merged/present/differing/conflicts."""
    report = {"sources": [], "merged_total": 0, "merged_by_table": {}, "conflicts_total": 0}
    for i, src in enumerate(srcs):
        rec = {"dir": src["dir"], "origin": src.get("origin")}
        report["sources"].append(rec)
        if src.get("error"):
            rec["error"] = src["error"]
            continue
        try:
            view, rec["wal"] = _view(src, fallback_main, os.path.join(work, "retired-%d" % i))
        except (OSError, ValueError) as exc:
            rec["error"] = "%s: %s" % (type(exc).__name__, exc)
            continue
        if rec["wal"].get("error"):
            rec["error"] = "its WAL cannot be replayed: %s" % rec["wal"]["error"]
            continue
        chk = sqlite3.connect("file:%s?mode=ro" % steplib.uri_path(view), uri=True)
        try:
            qc = steplib.quick_check(chk)
        finally:
            chk.close()
        if not qc["ok"]:
            rec["error"] = "the retired generation does not read clean (%s): kept, not merged" % "; ".join(
                qc["first"][:3])
            continue
        conn = sqlite3.connect("file:%s" % steplib.uri_path(target_db), uri=True, isolation_level=None)
        try:
            conn.execute("ATTACH DATABASE ? AS src", ("file:%s?mode=ro" % steplib.uri_path(view),))
            src_tables = set(_tables(conn, "src"))
            conn.execute("BEGIN IMMEDIATE")
            rec["tables"] = {}
            for table in _tables(conn, "main"):
                if table in src_tables:
                    rec["tables"][table] = _merge_table(conn, table)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            rec["error"] = "merge failed, nothing of this source merged: %s: %s" % (type(exc).__name__, exc)
            rec.pop("tables", None)
            continue
        finally:
            conn.close()
        rec["merged"] = sum(t["merged"] for t in rec["tables"].values())
        report["merged_total"] += rec["merged"]
        report["conflicts_total"] += sum(t["conflicts"] for t in rec["tables"].values())
        for table, t in rec["tables"].items():
            if t["merged"]:
                report["merged_by_table"][table] = report["merged_by_table"].get(table, 0) + t["merged"]
    return report


def describe(report):
    """`26 row(s) back from 2 retired WAL generation(s): messages 25, sessions 1 (...)`."""
    if not report or not report.get("sources"):
        return "no retired WAL generation"
    parts = ["%s: %d" % (s.get("origin"), s.get("merged", 0)) if not s.get("error") else
             "%s: not merged (%s)" % (s.get("origin"), s["error"]) for s in report["sources"]]
    return "%d row(s) back from %d retired WAL generation(s)%s [%s]" % (
        report["merged_total"], len(report["sources"]),
        (": " + ", ".join("%s %d" % kv for kv in sorted(report["merged_by_table"].items())))
        if report["merged_by_table"] else "", "; ".join(parts))

