"""hermes_verify: prove a profile's state.db takes writes and answers reads, after a repair or any time.

Why a write probe (field report 01): the gateway answered every message for hours while
every write failed with "database disk image is malformed"; read-path liveness is not
persistence. The probe stays inside Hermes' own schema (no scratch table): one committed
transaction inserts the key `fleetops_verify_probe` into state_meta, a fresh connection
reads it back, a second committed transaction deletes it, and another fresh connection
checks it is gone. Then quick_check, table-scan counts (NOT INDEXED, never an index)
against the repair report, an FTS MATCH answer for a word of a stored message, and, where
`hermes` is installed, Hermes' own `hermes sessions stats` reading the store.
Stdlib only, Python 3.8+; main(args) is the payload entry point.
"""
import os
import re
import shutil
import sqlite3
import subprocess
import time

from fleetops.remote import hermes_snapshot as fs

PROBE_KEY = "fleetops_verify_probe"
BAD_OUTPUT = ("malformed", "Traceback", "disk I/O error", "not a database")


def _q(name):
    return '"%s"' % name.replace('"', '""')


def _connect(db, timeout):
    if not os.path.isfile(db):
        raise sqlite3.OperationalError("no such file: %s" % db)
    return sqlite3.connect(db, timeout=timeout, isolation_level=None)


def write_probe(db, timeout=30.0):
    """{"ok", "detail"}: insert, read back, delete, confirm gone; each through its own connection."""
    token = "%d-%.6f" % (os.getpid(), time.time())
    step = "open"
    try:
        c = _connect(db, timeout)
        try:
            step = "schema"
            if not c.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='state_meta'").fetchone():
                return {"ok": False, "detail": "no state_meta table: cannot probe writes within Hermes' schema"}
            step = "insert"
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT OR REPLACE INTO state_meta(key, value) VALUES (?, ?)", (PROBE_KEY, token))
            c.execute("COMMIT")
        finally:
            c.close()
        step = "read back"
        c = _connect(db, timeout)
        try:
            row = c.execute("SELECT value FROM state_meta WHERE key = ?", (PROBE_KEY,)).fetchone()
            if not row or row[0] != token:
                return {"ok": False, "detail": "probe written but a fresh connection read %r" % (row,)}
            step = "delete"
            c.execute("BEGIN IMMEDIATE")
            c.execute("DELETE FROM state_meta WHERE key = ?", (PROBE_KEY,))
            c.execute("COMMIT")
        finally:
            c.close()
        step = "confirm"
        c = _connect(db, timeout)
        try:
            n = c.execute("SELECT count(*) FROM state_meta WHERE key = ?", (PROBE_KEY,)).fetchone()[0]
        finally:
            c.close()
        if n:
            return {"ok": False, "detail": "probe row still present after its delete was committed"}
        return {"ok": True, "detail": "insert, read back, delete committed through fresh connections"}
    except sqlite3.Error as exc:
        return {"ok": False, "detail": "%s failed: %s: %s" % (step, type(exc).__name__, exc)}


def read_checks(db, expect_counts=None, count_mode="at_least", timeout=30.0):
    """quick_check, NOT INDEXED counts against the expected ones, FTS triggers and MATCH probes."""
    out = {"quick_check": None, "counts": {}, "count_problems": [], "fts": {}, "fts_problems": []}
    try:
        c = _connect(db, timeout)
    except sqlite3.Error as exc:
        out["quick_check"] = {"ok": False, "errors": None, "first": [str(exc)]}
        return out
    try:
        c.execute("BEGIN")
        out["quick_check"] = fs.quick_check(c)
        for t, want in sorted((expect_counts or {}).items()):
            try:
                got = c.execute("SELECT count(*) FROM %s NOT INDEXED" % _q(t)).fetchone()[0]
            except sqlite3.Error as exc:
                out["counts"][t] = {"expected": want, "got": None, "error": str(exc)}
                out["count_problems"].append("%s: %s" % (t, exc))
                continue
            out["counts"][t] = {"expected": want, "got": got}
            if (count_mode == "exact" and got != want) or got < int(want):
                out["count_problems"].append("%s: %d rows, the repair report says %d" % (t, got, want))
        try:
            objs = c.execute("SELECT type, name, sql FROM sqlite_master").fetchall()
        except sqlite3.Error as exc:
            out["fts_problems"].append("schema unreadable: %s" % exc)
            objs = []
        fts = [n for ty, n, sql in objs if ty == "table" and sql and re.search(r"using\s+fts5", sql, re.I)]
        trig = [n for ty, n, sql in objs if ty == "trigger" and any(f in (sql or "") for f in fts)]
        out["fts_tables"], out["fts_triggers"] = fts, len(trig)
        if fts and not trig:
            out["fts_problems"].append("FTS tables %s have no sync triggers: they would stay empty" % fts)
        probe = None
        if fts:
            try:
                for rowid, text in c.execute(
                        "SELECT id, content FROM messages WHERE content IS NOT NULL ORDER BY id DESC LIMIT 200"):
                    words = re.findall(r"[A-Za-z0-9]{4,}", text if isinstance(text, str) else "")
                    if words:
                        probe = (rowid, words[0])
                        break
            except sqlite3.Error as exc:
                out["fts_problems"].append("cannot read messages for a probe word: %s" % exc)
        for name in fts:
            if probe is None:
                out["fts"][name] = {"probe": None, "ok": True, "note": "no message text to probe"}
                continue
            try:
                hits = [r[0] for r in c.execute("SELECT rowid FROM %s WHERE %s MATCH ?" % (_q(name), _q(name)),
                                                ('"%s"' % probe[1],))]
                ok = probe[0] in hits
                out["fts"][name] = {"probe": probe[1], "rowid": probe[0], "hits": len(hits), "ok": ok}
                if not ok:
                    out["fts_problems"].append("%s MATCH %r does not return message %d" % (name, probe[1], probe[0]))
            except sqlite3.Error as exc:
                out["fts"][name] = {"probe": probe[1], "ok": False, "error": str(exc)}
                out["fts_problems"].append("%s MATCH failed: %s" % (name, exc))
    except sqlite3.Error as exc:
        if out["quick_check"] is None:
            out["quick_check"] = {"ok": False, "errors": None, "first": [str(exc)]}
        else:
            out["fts_problems"].append(str(exc))
    finally:
        try:
            c.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        c.close()
    return out


def hermes_stats(hermes_bin, home, extra_env=None, timeout=180.0):
    """Run `hermes sessions stats` for this profile (HERMES_HOME named explicitly)."""
    env = dict(os.environ)
    env.update(extra_env or {})
    env["HERMES_HOME"] = home
    try:
        r = subprocess.run([hermes_bin, "sessions", "stats"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, env=env, cwd=home, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"ok": False, "rc": None, "output": str(exc)}
    text = r.stdout.decode("utf-8", "replace")
    bad = [b for b in BAD_OUTPUT if b in text]
    nums = dict((k.lower(), int(v.replace(",", ""))) for k, v in re.findall(
        r"(?im)^\s*(?:total\s+)?(sessions|messages)\s*:?\s*([\d,]+)\s*$", text))
    return {"ok": r.returncode == 0 and not bad, "rc": r.returncode, "output": text[-2000:],
            "bad_markers": bad, "numbers": nums}


def verify(loc, args):
    started = time.time()
    db = loc["db"]
    timeout = fs.num(args.get("busy_timeout"), 30.0)
    checks = {}
    problems = []
    checks["write_probe"] = write_probe(db, timeout)
    if not checks["write_probe"]["ok"]:
        problems.append("write probe: %s" % checks["write_probe"]["detail"])
    rc = read_checks(db, args.get("expect_counts") or {}, args.get("count_mode") or "at_least", timeout)
    checks.update(rc)
    if not (rc["quick_check"] or {}).get("ok"):
        q = rc["quick_check"] or {}
        problems.append("quick_check: %s error(s): %s" % (q.get("errors"), "; ".join(q.get("first") or [])[:300]))
    problems += rc["count_problems"] + rc["fts_problems"]
    hb = args.get("hermes_bin")
    if hb is None and args.get("hermes_stats", True) not in (False, "false", "no", "0"):
        hb = shutil.which("hermes")
    if hb:
        st = hermes_stats(hb, loc["home"], args.get("hermes_env"), fs.num(args.get("hermes_timeout"), 180.0))
        checks["hermes_sessions_stats"] = st
        if not st["ok"]:
            problems.append("`hermes sessions stats` failed (rc %s): %s" % (st["rc"], st["output"][-300:]))
    else:
        checks["hermes_sessions_stats"] = {"ok": None, "note": "hermes not installed here: skipped"}
    return problems, checks, round(time.time() - started, 3)


def main(args):
    """Payload: {hermes_home?, profile?, expect_counts?, count_mode?: at_least|exact, hermes_bin?,
    hermes_env?, busy_timeout?, run_id?, _check?}."""
    args = args or {}
    try:
        loc = fs.locate(args)
    except ValueError as exc:
        return {"changed": False, "failed": True, "skipped": False, "msg": str(exc)}
    if fs.truthy(args.get("_check")):
        return {"changed": False, "failed": False, "skipped": False,
                "msg": "check mode: would verify %s (write probe in state_meta, quick_check, counts, FTS, "
                       "hermes sessions stats)" % loc["db"]}
    lk, refused = fs.lock_or_refusal(loc, args, "hermes_verify")
    if refused:
        return refused
    try:
        problems, checks, elapsed = verify(loc, args)
    finally:
        lk.release()
    if problems:
        return {"changed": False, "failed": True, "skipped": False, "checks": checks, "problems": problems,
                "elapsed_s": elapsed, "msg": "%s fails verification: %s" % (loc["db"], "; ".join(problems))}
    st = checks.get("hermes_sessions_stats") or {}
    return {"changed": False, "failed": False, "skipped": False, "checks": checks, "problems": [],
            "elapsed_s": elapsed,
            "msg": "%s verified: writes commit, quick_check ok, counts %s, FTS %s%s" % (
                loc["db"], "as reported" if checks["counts"] else "not compared",
                "answers" if checks.get("fts_tables") else "absent (Hermes rebuilds it on open)",
                ", hermes sessions stats reads it" if st.get("ok") else "")}
