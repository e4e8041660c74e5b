"""The optional write probe of the audit (`--write-probe`): one short write-then-read
transaction on the store, made only when it cannot hurt, else the reason it was not made."""
import os
import sqlite3
import time

from urllib.parse import quote as _urlquote

from fleetops.remote.hermes import holders as hermes_holders


def write_probe(rec, opts):
    """A write-then-read through one short transaction, only when it cannot hurt; else why not.

    Safety argument: it runs only on a file whose checks all passed (never into a damaged
    b-tree); never under check mode; never while a process holds a retired WAL generation (a
    second writer is how that split-brain started); never in DELETE journal mode while anything
    holds the file (the probe's exclusive lock would make Hermes' 1 s busy timeout fail its own
    writes) nor while holders are unknown; never on a filesystem where WAL locking is unsafe;
    never as a user other than the file's owner (sidecars it created would lock Hermes out);
    never with a -wal but no -shm. It writes one row into state_meta, reads it back, deletes it
    and commits, under BEGIN IMMEDIATE with a short busy timeout: the content is unchanged and
    the lock is held for milliseconds. The journal mode is never changed.
    """
    db = rec["db"]
    h = rec.get("holders") or {}
    ev = rec.get("persistence") or {}
    refuse = None
    mode = ((rec.get("header") or {}).get("journal_mode"))
    busy = [x for x in h.get("holders") or []]
    st = None
    try:
        st = os.stat(db)
    except OSError:
        pass
    if opts.get("_check"):
        refuse = "check mode: the write probe writes"
    elif h.get("retired"):
        refuse = "a process holds a retired WAL generation (%s): stop it first" % ", ".join(
            hermes_holders.describe(x) for x in busy if x.get("retired"))
    elif rec.get("verdict") not in ("healthy", "not_persisting") or (rec.get("errors_total") or 0):
        refuse = "the file is %s: writing into it could spread the damage" % rec.get("verdict")
    elif mode != "wal" and (busy or h.get("status") != "known"):
        refuse = "journal mode %s with %s: the probe's lock would fail Hermes' own writes" % (
            mode, ("busy writer(s) " + ", ".join(hermes_holders.describe(x) for x in busy)) if busy
            else "holders unknown")
    elif (ev.get("filesystem") or {}).get("wal_unsafe"):
        refuse = "state.db is on %s: locking there is not safe for a second writer" % ev["filesystem"]["fstype"]
    elif st is None or st.st_uid != os.geteuid():
        refuse = "the audit does not run as the file's owner: sidecars it created would lock Hermes out"
    elif os.path.exists(db + "-wal") and not os.path.exists(db + "-shm"):
        refuse = "state.db-wal without state.db-shm: a new -shm beside a held one starts split-brain"
    if refuse:
        return {"done": False, "refused": refuse}
    started = time.time()
    out = {"done": True, "ok": False, "error": None, "journal_mode": mode}
    token = "fleetops-%d-%d" % (os.getpid(), int(started * 1000))
    conn = None
    try:
        conn = sqlite3.connect("file:%s?mode=rw" % _urlquote(os.path.abspath(db)), uri=True,
                               timeout=float(opts.get("write_probe_timeout", 2.0)), isolation_level=None)
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='state_meta'").fetchone() is None:
            return {"done": False, "refused": "no state_meta table to write into"}
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT OR REPLACE INTO state_meta(key, value) VALUES ('fleetops_write_probe', ?)", (token,))
            row = conn.execute("SELECT value FROM state_meta WHERE key='fleetops_write_probe'").fetchone()
            conn.execute("DELETE FROM state_meta WHERE key='fleetops_write_probe'")
            conn.execute("COMMIT")
        except sqlite3.Error:
            conn.execute("ROLLBACK")
            raise
        out["ok"] = bool(row and row[0] == token)
        if not out["ok"]:
            out["error"] = "the row written was not read back"
    except sqlite3.Error as exc:
        out["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        if conn is not None:
            conn.close()
    out["ms"] = round((time.time() - started) * 1000.0, 1)
    return out
