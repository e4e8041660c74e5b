"""The fence over a profile's state.db during a repair: taken when the writers are stopped,
held through quarantine, repair and swap, released once no process holds the old file.

Why (field report 02, HERMES-FACTS): the Desktop app respawns `hermes serve` for as long as
it is connected, so a quiet window with no holder may never come. Instead of waiting for one,
the store is fenced with SQLite's own locks (sqlite_fence): from the moment the keeper holds
them, everything committed is in the three-file image and no Hermes process can read or write
it, so a backend that comes back is harmless (it blocks, then fails to open). After the swap,
every process still holding the old inodes is stopped, then the fence is released, and the
next backend opens the new file. The keepers die with the SSH connection (their anchor), so a
killed controller or a dropped connection never leaves the store fenced.

Where it is recorded: ~/.hermes/fleetops/state/<profile>-fence.json (keeper PIDs with their
start times and the inode each one locks), so later payloads of the run can check it (the
kernel is asked too: F_GETLK names the lock's owner) and leave the keepers out of holder scans.
Stdlib only, Python 3.8+.
"""
import os
import signal
import time

from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import steplib
from fleetops.remote.sqlite import fence as sqlite_fence

DEFAULT_TTL = 3600.0


def record_path(loc):
    return os.path.join(loc["fleetops"], "state", "%s-fence.json" % loc["profile"])


def keepers(loc):
    """The live keepers of this profile's fence (dead ones, from an earlier run, are left out)."""
    rec = steplib.read_json(record_path(loc)) or {}
    return [k for k in rec.get("keepers") or [] if sqlite_fence.alive(k)]


def pids(loc):
    """Keeper PIDs, to leave out of holder scans (a keeper holds the file, but only to lock it)."""
    return set(k["pid"] for k in keepers(loc))


def _ident(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def holding(loc, path=None):
    """The keeper that fences the file now at path (default state.db): alive, on that inode,
    and the kernel's owner of its lock bytes; else None."""
    path = path or loc["db"]
    ident = _ident(path)
    for k in keepers(loc):
        if ident == (k["dev"], k["ino"]) and sqlite_fence.lock_owner(path) == k["pid"]:
            return k
    return None


def _save(loc, ks, anchor=None, seen=None):
    steplib.makedirs_private(os.path.dirname(record_path(loc)))
    old = steplib.read_json(record_path(loc)) or {}
    steplib.write_json(record_path(loc), {"version": 1, "profile": loc["profile"], "db": loc["db"],
                                     "anchor": anchor or old.get("anchor"), "keepers": ks,
                                     "seen": old.get("seen") or [] if seen is None else seen,
                                     "updated_at": steplib.iso()})


def note(loc, holders, step):
    """Record processes that came back while the fence was being taken or held (respawns): every
    step that sees one adds it, so the swap can report them all, with PIDs."""
    rec = steplib.read_json(record_path(loc)) or {}
    seen = rec.get("seen") or []
    known = set(x["pid"] for x in seen)
    new = [{"pid": h["pid"], "kind": h.get("kind"), "cmdline": h.get("cmdline"), "step": step}
           for h in holders or [] if h["pid"] not in known]
    if new:
        _save(loc, rec.get("keepers") or [], seen=seen + new)
    return new


def seen(loc):
    return (steplib.read_json(record_path(loc)) or {}).get("seen") or []


def start(loc, path, ttl=DEFAULT_TTL, wait=60.0, anchor=None):
    """Start a keeper on path (not waiting for it); returns the sqlite_fence.Keeper."""
    anchor = anchor or sqlite_fence.connection_anchor()
    k = sqlite_fence.Keeper(path, anchor, ttl, wait, expect=_ident(path))
    k.anchor = anchor
    return k


def adopt(loc, keeper, info, role):
    """Record a keeper that now holds its lock (with the others of this profile)."""
    info = dict(info, role=role, since=steplib.iso(info.get("since")))
    ks = [k for k in keepers(loc) if k["pid"] != info["pid"]] + [info]
    _save(loc, ks, getattr(keeper, "anchor", None), seen=[] if role == "db" else None)  # "db": a new fence
    return info


def fence_file(loc, path, role, ttl=DEFAULT_TTL, wait=30.0):
    """Fence one more file (the new state.db before it goes in place) and wait for the lock."""
    k = start(loc, path, ttl, wait)
    info = k.wait(wait)
    return adopt(loc, k, info, role)


def release(loc):
    """End every keeper of this profile and wait until they are gone; the PIDs released."""
    rec = steplib.read_json(record_path(loc)) or {}
    ks = rec.get("keepers") or []
    if not ks:
        return []
    done = sqlite_fence.release(ks)
    _save(loc, [])
    return done


def sweep(loc, old_db, grace=10.0, deadline=120.0, force=False):
    """Stop every process that still holds the old image (now at old_db and its sidecars):
    SIGTERM, SIGKILL after grace, until two scans in a row find none. Under the fence they
    could not read or write it; stopped, none can go on with the old file once it is lifted.
    Returns {"ok", "stopped": [...], "reason"}."""
    stopped, signalled = [], {}
    end = time.monotonic() + deadline
    clean = 0
    while clean < 2:
        sc = hermes_holders.scan_policy(old_db, loc.get("holder_scan") or "strict", exclude_pids=pids(loc))
        if sc["status"] != "known" and not force:
            return {"ok": False, "stopped": stopped,
                    "reason": "cannot tell who still holds the old file %s: %s" % (old_db, sc.get("reason"))}
        hs = sc["holders"]
        clean = 0 if hs else clean + 1
        now = time.monotonic()
        for h in hs:
            if h["kind"] not in hermes_holders.HERMES_KINDS and not force:
                return {"ok": False, "stopped": stopped,
                        "reason": "a process that is not Hermes holds the old file: %s" % hermes_holders.describe(h)}
            st = signalled.get(h["pid"])
            if st is None:
                why = hermes_holders.signal_pid(h["pid"], signal.SIGTERM)
                entry = {"pid": h["pid"], "kind": h["kind"], "cmdline": h.get("cmdline"), "how": "SIGTERM",
                         "ok": why is None}
                stopped.append(entry)
                if why:
                    return {"ok": False, "stopped": stopped, "reason": "cannot stop %s: %s" % (
                        hermes_holders.describe(h), why)}
                signalled[h["pid"]] = {"t": now, "entry": entry, "kill": False}
            elif not st["kill"] and now - st["t"] >= grace:
                hermes_holders.signal_pid(h["pid"], signal.SIGKILL)
                st["kill"] = True
                st["entry"]["how"] = "SIGTERM, then SIGKILL after %.0f s" % grace
        if now > end:
            return {"ok": False, "stopped": stopped, "reason": "%s still held after %.0f s by %s" % (
                old_db, deadline, ", ".join(hermes_holders.describe(h) for h in hs))}
        time.sleep(0.1)
    return {"ok": True, "stopped": stopped}


def lift(loc, old_db, grace=10.0, force=False):
    """After the moves: sweep the old image's holders, then release the fence. A result dict."""
    sw = sweep(loc, old_db, grace=grace, force=force)
    note(loc, sw["stopped"], "stopped after the swap (held the old file)")
    every = seen(loc)
    out = {"swept": sw["stopped"], "swept_count": len(sw["stopped"]), "seen": every, "seen_count": len(every)}
    if not sw["ok"]:
        # the fence stays (it ends with the connection): releasing it now would let a process
        # that still holds the old file write there
        out.update(ok=False, reason=sw["reason"], released=[])
        return out
    out.update(ok=True, released=release(loc))
    return out
