"""hermes_verify: prove a profile's state.db takes writes and answers reads, after a repair or any time.

Why a write probe (field report 01): the gateway answered every message for hours while
every write failed with "database disk image is malformed"; read-path liveness is not
persistence. The probe stays inside Hermes' own schema (no scratch table): one committed
transaction inserts the key `fleetops_verify_probe` into state_meta, a fresh connection
reads it back, a second committed transaction deletes it, and another fresh connection
checks it is gone. Then quick_check, table-scan counts (NOT INDEXED, never an index)
against the repair report, an FTS MATCH answer for a word of a stored message, and the host's
own Hermes reading the store: its `sessions stats`, and a search through its own SessionDB
(the interpreter that runs that Hermes, importing its hermes_state) that must find the probe
message. Which Hermes: `hermes_bin` when given, else the one a live holder of this store runs
(the restarted gateway), else `hermes` or `hermesx` on PATH; none found is reported, not
passed. Why both: a store every Hermes version opens the same way is no proof; the version
that runs there (0.19.0's inline FTS, 0.20.1's external content over a view) must read it.
Stdlib only, Python 3.8+; main(args) is the payload entry point.
"""
import json
import os
import re
import shutil
import sqlite3
import subprocess
import time

from fleetops.remote.host.inputs import flag, number
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import retired_wal, steplib
from fleetops.remote.hermes import writers as hermes_writers
from fleetops.remote.sqlite.sql import quote_ident

PROBE_KEY = "fleetops_verify_probe"
BAD_OUTPUT = ("malformed", "Traceback", "disk I/O error", "not a database")
HERMES_NAMES = ("hermes", "hermesx")
# Run by the host's Hermes interpreter: a search through its own SessionDB (a writable open,
# as every Hermes command does; 0.19.0 enables FTS only then). Prints one JSON line.
SEARCH_PY = r"""
import json, sys
from pathlib import Path
from hermes_state import SessionDB
db = SessionDB(db_path=Path(sys.argv[1]))
try:
    hits = db.search_messages(sys.argv[2], limit=int(sys.argv[3]), include_inactive=True)
finally:
    db.close()
print(json.dumps({"ids": [h.get("id") for h in hits]}))
"""



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
        out["quick_check"] = steplib.quick_check(c)
        for t, want in sorted((expect_counts or {}).items()):
            try:
                got = c.execute("SELECT count(*) FROM %s NOT INDEXED" % quote_ident(t)).fetchone()[0]
            except sqlite3.Error as exc:
                out["counts"][t] = {"expected": want, "got": None, "error": str(exc)}
                out["count_problems"].append("%s: %s" % (t, exc))
                continue
            out["counts"][t] = {"expected": want, "got": got}
            if (count_mode == "exact" and got != want) or got < int(want):
                out["count_problems"].append("%s: %d rows, the repair report says %d" % (t, got, want))
        out["duplicates"] = duplicate_messages(c)
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
        sqls = dict((n, sql) for ty, n, sql in objs if n in fts)
        out["probe"] = None
        for name in fts:
            # the newest message this FTS table indexes: from what it reads (its content= table
            # or view: 0.20.1's trigram view leaves tool rows out), else from messages
            src, key = _fts_source(sqls[name])
            probe = None
            try:
                for rowid, text in c.execute(
                        "SELECT %s, content FROM %s WHERE content IS NOT NULL ORDER BY %s DESC LIMIT 200"
                        % (quote_ident(key), quote_ident(src), quote_ident(key))):
                    words = re.findall(r"[A-Za-z0-9]{4,}", text if isinstance(text, str) else "")
                    if words:
                        probe = (rowid, words[0])
                        break
            except sqlite3.Error as exc:
                out["fts_problems"].append("cannot read %s for a probe word: %s" % (src, exc))
                continue
            if probe is None:
                out["fts"][name] = {"probe": None, "ok": True, "note": "no message text to probe"}
                continue
            if out["probe"] is None or name == "messages_fts":
                out["probe"] = [probe[1], probe[0]]
            try:
                hits = [r[0] for r in c.execute("SELECT rowid FROM %s WHERE %s MATCH ?" % (quote_ident(name), quote_ident(name)),
                                                ('"%s"' % probe[1],))]
                ok = probe[0] in hits
                out["fts"][name] = {"probe": probe[1], "rowid": probe[0], "hits": len(hits), "ok": ok,
                                    "reads": src}
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


def duplicate_messages(c):
    """Messages stored twice (same session, role, timestamp and text, any id), by a table scan:
    what two replays of one pending message leave. {"groups", "extra_rows", "examples": [ids]}."""
    cols = set(r[1] for r in c.execute("PRAGMA table_info(messages)"))
    if not set(retired_wal.DUP_KEY) <= cols:
        return {"groups": None, "note": "messages has no %s" % "/".join(retired_wal.DUP_KEY)}
    key = ", ".join(retired_wal.DUP_KEY)
    rows = c.execute("SELECT count(*), group_concat(id) FROM messages NOT INDEXED GROUP BY %s HAVING count(*) > 1"
                     % key).fetchall()
    return {"groups": len(rows), "extra_rows": sum(n - 1 for n, _ in rows),
            "examples": [ids for _n, ids in rows[:5]]}


def _fts_source(sql):
    """(table or view, rowid column) an FTS table indexes: its content= option, else messages."""
    m = re.search(r"\bcontent\s*=\s*'([^']+)'", sql or "", re.I)
    src = m.group(1) if m else "messages"
    k = re.search(r"\bcontent_rowid\s*=\s*'([^']+)'", sql or "", re.I)
    return src, k.group(1) if k else ("id" if src == "messages" else "rowid")


def find_hermes(db, hermes_bin=None):
    """(argv prefix that runs this host's Hermes, where it was found), or (None, why)."""
    if hermes_bin:
        return [hermes_bin], "hermes_bin"
    try:
        holders = hermes_holders.scan(db)["holders"]
    except (OSError, KeyError, ValueError):
        holders = []
    for h in holders:
        pid = h.get("pid")
        cmd = hermes_writers.hermes_command(h.get("cmdline"), hermes_writers.proc_exe(pid),
                                            hermes_writers.proc_environ(pid))
        if cmd:
            return cmd, "the command line of holder PID %s" % pid
    for name in HERMES_NAMES:
        found = shutil.which(name)
        if found:
            return [found], "PATH"
    return None, "no Hermes found (no hermes_bin, no Hermes holder, no %s on PATH)" % "/".join(HERMES_NAMES)


def hermes_python(cmd):
    """The interpreter of a Hermes command: itself when it is a python, else its script's #! line."""
    first = cmd[0]
    if re.match(r"python[0-9.]*$", os.path.basename(first)):
        return first
    try:
        with open(first, "rb") as fh:
            line = fh.readline(512).decode("utf-8", "replace")
    except OSError:
        return None
    if not line.startswith("#!"):
        return None
    parts = line[2:].split()
    if not parts:
        return None
    if os.path.basename(parts[0]) == "env" and len(parts) > 1:
        return shutil.which(parts[1])
    return parts[0]


def hermes_search(python, db, home, probe, extra_env=None, timeout=180.0, limit=100000):
    """Search for the probe word through the host Hermes' own SessionDB: its hits must hold the
    probe message."""
    env = dict(os.environ)
    env.update(extra_env or {})
    env["HERMES_HOME"] = home
    word, rowid = probe
    try:
        r = subprocess.run([python, "-c", SEARCH_PY, db, word, str(limit)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=home,
                           timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        return {"ok": False, "word": word, "rowid": rowid, "error": str(exc)}
    out = r.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        ids = json.loads(out[-1])["ids"]
    except (IndexError, ValueError, KeyError):
        return {"ok": False, "word": word, "rowid": rowid, "rc": r.returncode,
                "error": r.stderr.decode("utf-8", "replace")[-600:]}
    return {"ok": rowid in ids, "word": word, "rowid": rowid, "hits": len(ids), "python": python}


def hermes_stats(hermes_bin, home, extra_env=None, timeout=180.0):
    """Run `hermes sessions stats` for this profile (HERMES_HOME named explicitly)."""
    env = dict(os.environ)
    env.update(extra_env or {})
    env["HERMES_HOME"] = home
    try:
        cmd = list(hermes_bin) if isinstance(hermes_bin, (list, tuple)) else [hermes_bin]
        r = subprocess.run(cmd + ["sessions", "stats"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
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
    timeout = number(args.get("busy_timeout"), 30.0)
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
    if args.get("hermes_stats", True) in (False, "false", "no", "0"):
        checks["hermes_sessions_stats"] = {"ok": None, "note": "not asked for (hermes_stats=false)"}
        return problems, checks, round(time.time() - started, 3)
    cmd, where = find_hermes(db, args.get("hermes_bin"))
    checks["hermes"] = {"command": cmd, "found_by": where}
    if not cmd:
        checks["hermes_sessions_stats"] = {"ok": None, "note": where + ": skipped"}
        return problems, checks, round(time.time() - started, 3)
    htimeout = number(args.get("hermes_timeout"), 180.0)
    st = hermes_stats(cmd, loc["home"], args.get("hermes_env"), htimeout)
    checks["hermes_sessions_stats"] = st
    if not st["ok"]:
        problems.append("`%s sessions stats` failed (rc %s): %s" % (
            os.path.basename(cmd[-1]), st["rc"], st["output"][-300:]))
    if rc.get("probe") and rc.get("fts_tables"):
        py = hermes_python(cmd)
        if py is None:
            sr = {"ok": False, "error": "no interpreter found for %s" % cmd[0]}
        else:
            sr = hermes_search(py, db, loc["home"], rc["probe"], args.get("hermes_env"), htimeout)
        checks["hermes_search"] = sr
        if not sr["ok"]:
            problems.append("a search through the host Hermes' own SessionDB for %r does not find "
                            "message %s: %s" % (sr.get("word"), sr.get("rowid"),
                                                sr.get("error") or "%s hits" % sr.get("hits")))
    return problems, checks, round(time.time() - started, 3)


def main(args):
    """Payload: {hermes_home?, profile?, expect_counts?, count_mode?: at_least|exact, hermes_bin?,
    hermes_env?, busy_timeout?, run_id?, _check?}."""
    args = args or {}
    loc, bad = steplib.located(args)
    if bad:
        return bad
    if flag(args.get("_check")):
        return {"changed": False, "failed": False, "skipped": False,
                "msg": "check mode: would verify %s (write probe in state_meta, quick_check, counts, FTS, "
                       "hermes sessions stats)" % loc["db"]}
    lk, refused = steplib.lock_or_refusal(loc, args, "hermes_verify")
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
    dup = checks.get("duplicates") or {}
    return {"changed": False, "failed": False, "skipped": False, "checks": checks, "problems": [],
            "elapsed_s": elapsed,
            "msg": "%s verified: writes commit, quick_check ok, counts %s, FTS %s%s%s%s" % (
                loc["db"], "as reported" if checks["counts"] else "not compared",
                "answers" if checks.get("fts_tables") else "absent (Hermes rebuilds it on open)",
                ", hermes sessions stats reads it" if st.get("ok") else "",
                ", its own SessionDB search finds message %s" % checks["hermes_search"]["rowid"]
                if (checks.get("hermes_search") or {}).get("ok") else "",
                "; no message stored twice" if dup.get("groups") == 0 else
                "; WARNING: %d message(s) stored twice (ids %s): a replay of Hermes' pending_messages, "
                "Hermes' to settle" % (dup["extra_rows"], "; ".join(dup["examples"])) if dup.get("groups") else "")}
