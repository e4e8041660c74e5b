"""Is Hermes persisting conversations now? The evidence Hermes leaves when it is not.

Why: in both field incidents the gateway kept answering for hours to a day while nothing
reached state.db ("falls back to JSONL instead of dying"; "every write failed with database
disk image is malformed", reads still worked). The file can even pass quick_check then: the
gateway gave up on the store at start-up and never reopened it, or a process holds a retired
copy. So the audit also reads what Hermes writes beside the store when a write fails:

- its logs (errors.log, gateway.log, agent.log): write errors counted by kind, first/last time;
- the fallback files (sessions/*.jsonl, pending_messages/) newer than the store's last write;
- its own repair bookkeeping (state.db.repair-attempts.json, retired-WAL captures' manifests);
- the gateway's uptime against the newest message, and the filesystem under the store.

Bounded and read-only: the last `log_tail_bytes` of each log, entries newer than
`evidence_days`, at most MAX_ENTRIES directory entries and MAX_JSON bytes per JSON file; no
file is opened for writing. The one exception is the write probe (`write_probe.py`), off unless
asked for (its safety argument is in its docstring and docs/internals/persistence.md).

Stdlib only, Python 3.8+.
"""
import datetime
import json
import os
import re
import sqlite3
import time

from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes.write_probe import write_probe

LOG_FILES = ("errors.log", "gateway.log", "agent.log")
MAX_ENTRIES = 5000
MAX_JSON = 256 * 1024
SAMPLE_CHARS = 240
GRACE_S = 5.0  # a file or log line this close to the last write is the same activity (clock granularity)

# What a log event says, first match wins: (kind, markers, does it mean a write did not land).
# The markers are Hermes' own wording (0.19 to upstream) and SQLite's (both FTS5 wordings).
LOG_KINDS = (
    ("retired_wal", ("DeletedWalGenerationError", "still holds an old copy of the session database",
                     "deleted state.db-wal or state.db-shm"), True),
    ("store_unavailable", ("SQLite session store not available", "SQLite session store unavailable",
                           "falling back to JSONL"), True),
    ("write_refused", ("session storage could not be written",), True),
    ("fts_corruption", ("malformed inverted index", "fts5: corruption found", "fts5: corrupt",
                        "vtable constructor failed: messages_fts", "SQLITE_CORRUPT_VTAB",
                        "FTS-corruption error", "FTS write corruption"), True),
    ("malformed", ("database disk image is malformed",), True),
    ("not_a_database", ("file is not a database",), True),
    ("disk_io", ("disk I/O error",), True),
    ("locking_protocol", ("locking protocol",), True),
    ("write_failed", ("transcript append failed", "routing save failed", "FOREIGN KEY constraint failed",
                      "flush failed"), True),
    ("repair_skipped", ("repair skipped", "repair aborted", "repair failed"), False),
)
WRITE_KINDS = tuple(k for k, _m, w in LOG_KINDS if w)
_TS_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[,.](\d{1,6}))?")

# Filesystems where SQLite's WAL (shared memory and POSIX locks across processes) is known to be
# unsafe or refused: network filesystems, FUSE, virtiofs and 9p (VM shares).
WAL_UNSAFE = {"nfs": "network filesystem", "nfs4": "network filesystem", "cifs": "network filesystem (SMB)",
              "smb3": "network filesystem (SMB)", "smbfs": "network filesystem (SMB)",
              "afs": "network filesystem", "ceph": "network filesystem", "glusterfs": "network filesystem",
              "9p": "VM share (9p)", "virtiofs": "VM share (virtiofs): corruption reported within a minute",
              "fuse": "FUSE filesystem", "fuseblk": "FUSE filesystem"}


def _iso(ts):
    if ts is None:
        return None
    return datetime.datetime.utcfromtimestamp(ts).strftime("%Y-%m-%dT%H:%M:%SZ")


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def _read_json(path):
    """(data, error): at most MAX_JSON bytes, never raises."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_JSON + 1)
    except OSError as exc:
        return None, "cannot read: %s" % (exc.strerror or exc)
    if len(raw) > MAX_JSON:
        return None, "larger than %d bytes: not read" % MAX_JSON
    try:
        return json.loads(raw.decode("utf-8", "replace")), None
    except ValueError as exc:
        return None, "not JSON: %s" % exc


# --- filesystem -------------------------------------------------------------------------------

def _unescape_mount(field):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem(path, mountinfo="/proc/self/mountinfo"):
    """The mount under path (longest matching mount point): {fstype, mount_point, source, wal_unsafe, why}."""
    target = os.path.realpath(os.path.dirname(os.path.abspath(path)) or "/")
    best = None
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            lines = f.read(4 * 1024 * 1024).splitlines()
    except OSError as exc:
        return {"fstype": None, "mount_point": None, "source": None, "wal_unsafe": None,
                "why": "cannot read %s: %s" % (mountinfo, exc.strerror or exc)}
    for line in lines:
        left, sep, right = line.partition(" - ")
        parts = left.split()
        rparts = right.split()
        if not sep or len(parts) < 5 or not rparts:
            continue
        mp = _unescape_mount(parts[4])
        inside = target == mp or target.startswith(mp.rstrip("/") + "/") or mp == "/"
        if inside and (best is None or len(mp) >= len(best[0])):  # later mounts over the same point win
            best = (mp, rparts[0], _unescape_mount(rparts[1]) if len(rparts) > 1 else None)
    if best is None:
        return {"fstype": None, "mount_point": None, "source": None, "wal_unsafe": None, "why": "no mount found"}
    mp, fstype, source = best
    base = fstype.split(".", 1)[0]
    why = WAL_UNSAFE.get(fstype) or WAL_UNSAFE.get(base)
    return {"fstype": fstype, "mount_point": mp, "source": source, "wal_unsafe": bool(why), "why": why}


# --- the store's last write -------------------------------------------------------------------

def newest_message(conn, objs):
    """max(messages.timestamp) by a table scan (an index may be the damaged part); None without messages."""
    if "messages" not in objs:
        return {"timestamp": None, "error": None}
    try:
        row = conn.execute("SELECT max(timestamp) FROM messages NOT INDEXED").fetchone()
        ts = row[0] if row else None
        return {"timestamp": float(ts) if isinstance(ts, (int, float)) else None, "error": None}
    except sqlite3.Error as exc:
        return {"timestamp": None, "error": "%s: %s" % (type(exc).__name__, exc)}


def last_write(db, newest):
    """The store's last committed write: the newest of the main file's and WAL's mtimes and message."""
    cands = {"db_mtime": _mtime(db), "wal_mtime": _mtime(db + "-wal"), "newest_message": newest}
    known = [v for v in cands.values() if v is not None]
    out = {k: _iso(v) for k, v in cands.items()}
    out["at_ts"] = max(known) if known else None
    out["at"] = _iso(out["at_ts"])
    return out


# --- logs -------------------------------------------------------------------------------------

def _parse_ts(line):
    m = _TS_RE.match(line)
    if not m:
        return None
    try:
        t = time.strptime(m.group(1) + " " + m.group(2), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    frac = float("0." + m.group(3)) if m.group(3) else 0.0
    return time.mktime(t) + frac  # Hermes logs the host's local time


def _classify(text):
    low = text.lower()
    for kind, markers, _w in LOG_KINDS:
        if any(mk.lower() in low for mk in markers):
            return kind
    return None


def _events(text):
    """(timestamp, text) per log record: a timestamped line and the traceback lines under it."""
    cur_ts, cur = None, []
    for line in text.splitlines():
        ts = _parse_ts(line)
        if ts is not None:
            if cur:
                yield cur_ts, "\n".join(cur)
            cur_ts, cur = ts, [line]
        elif cur:
            cur.append(line)
        # lines before the first timestamp of the tail belong to a record cut off: skipped
    if cur:
        yield cur_ts, "\n".join(cur)


def read_logs(home, since, now, tail_bytes):
    """Persistence failures in Hermes' logs: {kinds: {kind: {count, last_hour, first, last, sample}}, files}.

    The same record is written to errors.log, agent.log and gateway.log alike: it counts once."""
    files = {}
    seen = {}
    kinds = {}
    for name in LOG_FILES:
        path = os.path.join(home, "logs", name)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                start = max(0, size - tail_bytes)
                f.seek(start)
                raw = f.read(tail_bytes)
        except OSError as exc:
            if os.path.exists(path):
                files[name] = {"error": exc.strerror or str(exc)}
            continue
        if start:
            raw = raw.split(b"\n", 1)[1] if b"\n" in raw else b""
        files[name] = {"size": size, "read_bytes": len(raw), "truncated": bool(start)}
        for ts, text in _events(raw.decode("utf-8", "replace")):
            if ts is None or ts < since:
                continue
            key = (round(ts, 3), text.split("\n", 1)[0][23:])
            if key in seen:
                if seen[key] is not None and name not in kinds[seen[key]]["files"]:
                    kinds[seen[key]]["files"].append(name)
                continue
            kind = _classify(text)
            seen[key] = kind
            if kind is None:
                continue
            k = kinds.setdefault(kind, {"count": 0, "last_hour": 0, "first_ts": ts, "last_ts": ts,
                                        "sample": None, "files": [], "_ts": []})
            k["count"] += 1
            k["_ts"].append(ts)
            if ts >= now - 3600:
                k["last_hour"] += 1
            k["first_ts"] = min(k["first_ts"], ts)
            if ts >= k["last_ts"]:
                k["last_ts"] = ts
                k["sample"] = text.split("\n", 1)[0][:SAMPLE_CHARS]
            if name not in k["files"]:
                k["files"].append(name)
            if "NFS/SMB" in text:
                k["hint"] = "Hermes suggests a network or FUSE filesystem"
    for k in kinds.values():
        k["first"], k["last"] = _iso(k["first_ts"]), _iso(k["last_ts"])
    return {"files": files, "kinds": kinds}


# --- fallback files ---------------------------------------------------------------------------

def fallback_files(home, last_ts, since):
    """sessions/*.jsonl and pending_messages/* newer than the store's last write (and than `since`)."""
    out = {}
    for key, folder, pattern in (("sessions_jsonl", "sessions", ".jsonl"), ("pending_messages", "pending_messages", "")):
        d = os.path.join(home, folder)
        rec = {"total": 0, "newer": 0, "newest": None, "examples": [], "capped": False}
        try:
            it = os.scandir(d)
        except OSError:
            out[key] = rec
            continue
        newest = None
        with it:
            for n, e in enumerate(it):
                if n >= MAX_ENTRIES:
                    rec["capped"] = True
                    break
                if not e.name.endswith(pattern) or e.name.startswith("."):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if not (st.st_mode & 0o170000 == 0o100000):
                    continue
                rec["total"] += 1
                if st.st_mtime < since or (last_ts is not None and st.st_mtime <= last_ts + GRACE_S):
                    continue
                rec["newer"] += 1
                newest = st.st_mtime if newest is None else max(newest, st.st_mtime)
                if len(rec["examples"]) < 3:
                    rec["examples"].append(e.name)
        rec["newest"] = _iso(newest)
        out[key] = rec
    return out


# --- Hermes' own repair bookkeeping -----------------------------------------------------------

def repair_attempts(db):
    """state.db.repair-attempts.json: its scalar fields (failed_attempts, ...) and list lengths."""
    path = db + ".repair-attempts.json"
    if not os.path.exists(path):
        return None
    data, err = _read_json(path)
    out = {"path": path, "mtime": _iso(_mtime(path)), "error": err, "fields": {}}
    if isinstance(data, dict):
        for k, v in list(data.items())[:24]:
            if isinstance(v, (int, float, bool)) or v is None:
                out["fields"][k] = v
            elif isinstance(v, str):
                out["fields"][k] = v[:160]
            elif isinstance(v, (list, dict)):
                out["fields"][k] = "%d item(s)" % len(v)
        fa = data.get("failed_attempts")
        out["failed_attempts"] = fa if isinstance(fa, int) else None
    elif isinstance(data, list):
        out["fields"]["attempts"] = "%d item(s)" % len(data)
        out["failed_attempts"] = sum(1 for a in data if isinstance(a, dict) and a.get("ok") is False) or None
    return out


def retired_wal_capture(path):
    """One state.db.retired-wal-<ts>-<pid>/ directory and what its manifest.json says (kept, never applied)."""
    out = {"path": path, "partial": path.endswith(".partial"), "manifest": False}
    mpath = os.path.join(path, "manifest.json")
    if not os.path.exists(mpath):
        return out
    data, err = _read_json(mpath)
    out["manifest"] = True
    if err or not isinstance(data, dict):
        out["manifest_error"] = err or "manifest is not an object"
        return out
    for k in ("version", "database", "trigger", "pid", "captured_at", "sqlite", "path_generation_at_capture"):
        v = data.get(k)
        if isinstance(v, (str, int, float)) or v is None:
            out[k] = v if not isinstance(v, str) else v[:200]
    for side in ("wal", "shm"):
        s = data.get(side)
        if isinstance(s, dict):
            out[side] = {k: s.get(k) for k in ("file", "bytes", "sha256") if k in s}
    main = data.get("main")
    if isinstance(main, dict):
        m = {k: main.get(k) for k in ("mode", "size", "bytes", "sha256") if k in main}
        hdr = main.get("header")
        if isinstance(hdr, dict):
            m["header"] = {k: hdr.get(k) for k in ("page_size", "change_counter", "page_count") if k in hdr}
        out["main"] = m
    pid = data.get("pid")
    if isinstance(pid, int):
        info = hermes_holders.process_info(pid)
        out["pid_alive"] = bool(info and info.get("state") != "Z")
    return out


# --- the gateway ------------------------------------------------------------------------------

def _boot_time(proc="/proc"):
    try:
        with open(os.path.join(proc, "stat")) as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def gateway_activity(gateway_pid, holders, now):
    """A live gateway's PID, start time and uptime, and whether it holds state.db (None: cannot tell)."""
    if not gateway_pid or not gateway_pid.get("pid") or not str(gateway_pid.get("state", "")).startswith("live"):
        return None
    pid = gateway_pid["pid"]
    info = hermes_holders.process_info(pid)
    if info is None:
        return None
    started = None
    boot = _boot_time()
    if boot is not None and info.get("start_time") is not None:
        started = boot + info["start_time"] / float(os.sysconf("SC_CLK_TCK"))
    holds = None
    if holders is not None:
        if any(h.get("pid") == pid for h in holders.get("holders") or []):
            holds = True
        elif os.path.isdir("/proc/%d/fd" % pid) and os.access("/proc/%d/fd" % pid, os.R_OK):
            holds = False
    return {"pid": pid, "started": _iso(started), "started_ts": started,
            "uptime_s": round(now - started, 1) if started else None, "holds_store": holds}


# --- verdict ----------------------------------------------------------------------------------

def _age(seconds):
    if seconds is None:
        return "?"
    if seconds < 120:
        return "%d s" % seconds
    if seconds < 7200:
        return "%.0f min" % (seconds / 60.0)
    if seconds < 172800:
        return "%.1f h" % (seconds / 3600.0)
    return "%.1f d" % (seconds / 86400.0)


def judge(ev, now, stale_hours):
    """(not_persisting reasons, warnings) from the evidence; docs/internals/persistence.md says each rule."""
    reasons, warns = [], []
    lw = (ev.get("last_write") or {}).get("at_ts")
    gw = ev.get("gateway")
    kinds = (ev.get("logs") or {}).get("kinds") or {}
    su = kinds.get("store_unavailable")
    if su and gw and gw.get("started_ts") and su["last_ts"] >= gw["started_ts"] - 1:
        reasons.append("gateway PID %s (up %s) logged %r at %s and has not reopened the store since"
                       % (gw["pid"], _age(gw.get("uptime_s")), su["sample"][24:][:120], su["last"]))
    after = {}
    if lw is not None:
        for k, v in kinds.items():
            n = sum(1 for t in v.get("_ts") or () if t > lw + GRACE_S)
            if k in WRITE_KINDS and n:
                after[k] = n
    if after:
        last = max(kinds[k]["last_ts"] for k in after)
        reasons.append("%d write error(s) logged after the store's last write at %s: %s; last at %s" % (
            sum(after.values()), _iso(lw), ", ".join("%s %d" % kv for kv in sorted(after.items())), _iso(last)))
        ev["errors_after_last_write"] = after
    fb = ev.get("fallback") or {}
    for key, label in (("sessions_jsonl", "sessions/*.jsonl"), ("pending_messages", "pending_messages/")):
        f = fb.get(key) or {}
        if f.get("newer"):
            reasons.append("%d file(s) in %s newer than the store's last write at %s (newest %s)"
                           % (f["newer"], label, _iso(lw), f["newest"]))
    recent = {k: v for k, v in kinds.items() if k in WRITE_KINDS and v["last_hour"]}
    if recent:
        warns.append({"code": "write_errors", "msg": "%d write error(s) in the last hour: %s" % (
            sum(v["last_hour"] for v in recent.values()),
            "; ".join("%s %d (%d since %s, last %s)" % (k, v["last_hour"], v["count"], v["first"], v["last"])
                      for k, v in sorted(recent.items())))})
    dio = kinds.get("disk_io") or kinds.get("locking_protocol")
    fs = ev.get("filesystem") or {}
    if dio and fs.get("fstype") and fs.get("wal_unsafe") is False:
        warns.append({"code": "disk_io_local_fs", "msg": "Hermes logged %r but the store is on %s (%s): "
                      "the NFS/SMB/FUSE hint does not apply, look for a second writer"
                      % ("disk I/O error" if kinds.get("disk_io") else "locking protocol", fs["fstype"],
                         fs["mount_point"])})
    if gw and gw.get("holds_store") is False and (gw.get("uptime_s") or 0) > 300:
        warns.append({"code": "gateway_without_store", "msg": "gateway PID %s has run %s without state.db open"
                      % (gw["pid"], _age(gw["uptime_s"]))})
    nm = (ev.get("newest_message") or {}).get("timestamp")
    if gw and gw.get("started_ts") and (gw.get("uptime_s") or 0) > stale_hours * 3600 \
            and (nm is None or nm < gw["started_ts"]):
        warns.append({"code": "no_message_since_gateway_start", "msg": "gateway PID %s has run %s and no message "
                      "reached the store since it started (newest message %s)"
                      % (gw["pid"], _age(gw["uptime_s"]), _iso(nm) or "none")})
    ra = ev.get("repair_attempts")
    if ra and ra.get("failed_attempts"):
        warns.append({"code": "hermes_repair_failed", "msg": "%s: failed_attempts=%s (%s)"
                      % (os.path.basename(ra["path"]), ra["failed_attempts"], ra["mtime"])})
    if "repair_skipped" in kinds:
        k = kinds["repair_skipped"]
        warns.append({"code": "hermes_repair_skipped", "msg": "Hermes' repair skipped/failed %d time(s), last %s: %s"
                      % (k["count"], k["last"], k["sample"][24:][:120])})
    if fs.get("wal_unsafe"):
        warns.append({"code": "wal_unsafe_fs", "msg": "state.db is on %s (%s at %s): WAL is not safe there"
                      % (fs["fstype"], fs["why"], fs["mount_point"])})
    return reasons, warns


def evidence(rec, entry, opts, now):
    """Gather every piece of evidence for one store into rec["persistence"]; returns its reasons and warnings."""
    db = rec["db"]
    home = entry.get("home") or os.path.dirname(db)
    since = now - float(opts.get("evidence_days", 7)) * 86400
    newest = rec.pop("_newest_message", None) or {"timestamp": None, "error": None}
    ev = {"filesystem": filesystem(db), "newest_message": dict(newest, at=_iso(newest.get("timestamp")))}
    ev["last_write"] = last_write(db, newest.get("timestamp"))
    ev["logs"] = read_logs(home, since, now, int(opts.get("log_tail_bytes", 1048576)))
    ev["fallback"] = fallback_files(home, ev["last_write"]["at_ts"], since)
    ev["repair_attempts"] = repair_attempts(db)
    ev["gateway"] = gateway_activity(rec.get("gateway_pid"), rec.get("holders"), now)
    reasons, warns = judge(ev, now, float(opts.get("stale_hours", 6)))
    for k in ev["logs"]["kinds"].values():
        k.pop("_ts", None)
        k.pop("first_ts", None)
        k.pop("last_ts", None)
    ev["persisting"] = "no" if reasons else ("errors" if any(w["code"] == "write_errors" for w in warns) else "yes")
    ev["reasons"] = reasons
    return ev, reasons, warns


def summary(ev):
    """One short line for the fleet table: 'yes', 'NO: ...', 'errors: ...'."""
    if not ev:
        return "-"
    kinds = (ev.get("logs") or {}).get("kinds") or {}
    errs = {k: v for k, v in kinds.items() if k in WRITE_KINDS}
    parts = []
    if errs:
        parts.append("%d write err (%d in 1 h, last %s)" % (
            sum(v["count"] for v in errs.values()), sum(v["last_hour"] for v in errs.values()),
            max(v["last"] for v in errs.values())))
    fb = ev.get("fallback") or {}
    n = sum((fb.get(k) or {}).get("newer", 0) for k in ("sessions_jsonl", "pending_messages"))
    if n:
        parts.append("%d fallback file(s)" % n)
    if "store_unavailable" in kinds:
        parts.append("store unavailable at %s" % kinds["store_unavailable"]["last"])
    head = {"no": "NO", "errors": "errors", "yes": "yes"}.get(ev.get("persisting"), "?")
    return head + (": " + "; ".join(parts) if parts else "")


def _capture_warnings(rec):
    """Retired-WAL captures beside the store: forensic evidence to keep, named with what they say."""
    caps = (rec.get("backups") or {}).get("retired_wal_captures") or []
    if not caps:
        return []
    newest = caps[-1]
    what = ", ".join("%s %s" % (k, newest[k]) for k in ("trigger", "captured_at", "pid") if newest.get(k))
    if newest.get("pid_alive"):
        what += " (that PID still runs)"
    return [{"code": "retired_wal_captures", "msg": "%d retired-WAL capture(s) beside state.db, newest %s%s: keep them"
             % (len(caps), os.path.basename(newest["path"]), (" (" + what + ")") if what else
                ("" if newest.get("manifest") else " (no manifest.json)"))}]


def apply(rec, entry, opts, now):
    """Add the persistence evidence, condition `not_persisting` and its warnings to an audit record."""
    if rec.get("verdict") == "missing" and not os.path.exists(rec.get("db") or ""):
        return
    ev, reasons, warns = evidence(rec, entry, opts, now)
    rec["persistence"] = ev
    if opts.get("write_probe"):
        ev["write_probe"] = write_probe(rec, opts)
        wp = ev["write_probe"]
        if wp.get("done") and not wp.get("ok"):
            reasons.append("write probe failed: %s" % wp.get("error"))
            ev["persisting"] = "no"
    warns.extend(_capture_warnings(rec))
    rec["warnings"].extend(warns)
    if reasons:
        ev["reasons"] = reasons
        if "not_persisting" not in rec["conditions"]:
            rec["conditions"].append("not_persisting")
        rec["reasons"] = reasons + list(rec.get("reasons") or [])
        if rec.get("verdict") in ("healthy", "fts_index_damage", "index_damage"):
            rec["verdict"] = "not_persisting"
