"""The three-file image of a profile's state.db replaced without ever losing the original:
quarantine, swap, rollback and the recovery of an interrupted swap.

Why this shape (field reports 01-03): state.db, -wal and -shm are one image, so they are
copied aside together (quarantine, sha256 manifest) and moved aside together (swap), sidecars
first, so the new file never sits beside the old WAL (SQLite would replay the old frames onto
it); state.db itself is hard-linked aside and the new file renamed over it, so the path never
stands empty for a respawning backend to create a new store at. Every step is recorded in a
journal on the host (~/.hermes/fleetops/state/swap-journal.json, written and fsynced before
each step; swap_journal); the files are identified by (st_dev, st_ino), so the next run can
tell exactly which steps happened and finish the swap or undo it, never leaving it half done.
Nothing is deleted or overwritten: a rename never lands on an existing path (but the state.db
a link has just put aside), and a rollback moves the current file aside before putting the
quarantined original back (sha256 checked).
All steps refuse while any process holds the database, except Hermes processes waiting at the
fence (hermes_fence), which can neither read nor write it; after the moves the swap stops every
process still holding the old inodes, then lifts the fence.

Stdlib only, Python 3.8+; run(args, action) is what the payloads quarantine, swap and
rollback call.
"""
import os
import sqlite3

from fleetops.remote.host.inputs import flag
from fleetops.remote.hermes import fence as hermes_fence
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import paths as hermes_paths
from fleetops.remote.hermes import steplib
from fleetops.remote.hermes import swap_journal as sj
from fleetops.remote.hermes.swap_journal import SwapError, journal_path
from fleetops.remote.host.contract import result
from fleetops.remote.host.durable import fsync_dir, fsync_file, sha256_file

SIDECARS = steplib.SIDECARS


def pointer_path(loc):
    return os.path.join(loc["fleetops"], "state", "%s-quarantine.json" % loc["profile"])


def _result(ok, msg, changed=False, **extra):
    """A step's result, told whether the step held (`ok`) rather than whether it failed."""
    return result(changed, not ok, msg, **extra)


def no_holders(loc, force=False):
    """Raise SwapError naming every holder (or the reason the scan is incomplete).

    Under the fence (its keeper holds the SQLite locks of the file in place) Hermes holders are
    harmless, respawned backends that can neither read nor write: they are tolerated, listed in
    result["fenced"]. Anything else holding the file is still refused."""
    sc = hermes_holders.scan_policy(loc["db"], loc.get("holder_scan") or "strict",
                                    exclude_pids=hermes_fence.pids(loc))
    fence = hermes_fence.holding(loc) if sc["holders"] else None
    if fence and not [h for h in sc["holders"] if h["kind"] not in hermes_holders.HERMES_KINDS]:
        sc["fenced"] = [dict((k, h.get(k)) for k in ("pid", "ppid", "kind", "cmdline")) for h in sc["holders"]]
        sc["holders"] = []
        sc["fence"] = fence
        hermes_fence.note(loc, sc["fenced"], "waiting at the fence")
    if sc["holders"]:
        raise SwapError("refusing: %d process(es) hold %s: %s. Stop them first (hermes_stop_writers); "
                        "nothing was changed." % (len(sc["holders"]), loc["db"], "; ".join(
                            hermes_holders.describe(h) for h in sc["holders"])))
    if sc["status"] != "known" and not force:
        raise SwapError("refusing: cannot tell whether a process holds %s (%s); nothing was changed."
                        % (loc["db"], sc.get("reason")))
    return sc


def pending(loc):
    """The pending journal (any profile: the host lock serialises runs), or None."""
    j = steplib.read_json(journal_path(loc))
    if j and j.get("status") == "pending":
        return j
    return None


def resolve(loc, prefer="finish", force=False):
    """Finish or undo an interrupted journal; returns a description, or None if nothing was pending."""
    j = pending(loc)
    if j is None:
        return None
    jloc = dict(loc, db=j["db"])
    no_holders(jloc, force)
    places = [sj.where(m) for m in j["moves"]]
    lost = [m["src"] for m, p in zip(j["moves"], places) if p is None]
    if lost:
        raise SwapError("interrupted %s %s cannot be resolved: %s are neither at their source nor their "
                        "destination (changed by hand?). Nothing was changed; inspect %s and the journal %s."
                        % (j["kind"], j["id"], ", ".join(lost), j.get("quarantine_dir"), journal_path(loc)))
    done = [i for i, p in enumerate(places) if p == "dst"]
    decision = prefer
    why = "journal says step %s of %d" % (j.get("next"), len(j["moves"]))
    if decision == "finish":
        for m, p in zip(j["moves"], places):
            if p == "src" and m.get("sha256") and sha256_file(m["src"]) != m["sha256"]:
                decision = "rollback"
                why += "; %s no longer has its recorded sha256" % m["src"]
    path = journal_path(loc)
    if decision == "finish":
        for m, p in zip(j["moves"], places):
            if p == "src":
                sj.do(m, j["moves"])
        sj.finish_checks(j)
        j["status"] = "done"
    else:
        for m, p in reversed(list(zip(j["moves"], places))):
            if p == "dst":
                sj.undo(m)
        bad = [m["src"] for m in j["moves"] if m.get("sha256") and sha256_file(m["src"]) != m["sha256"]]
        if bad:
            raise SwapError("rolled back, but sha256 differs for %s" % ", ".join(bad))
        j["status"] = "rolled_back"
    j["resolved_at"] = steplib.iso()
    j["resolution"] = {"decision": decision, "why": why, "steps_done_before": len(done)}
    steplib.write_json(path, j)
    return {"id": j["id"], "kind": j["kind"], "decision": decision, "why": why,
            "quarantine_dir": j.get("quarantine_dir"),
            "steps_done_before": len(done), "of": len(j["moves"])}


# ---------------------------------------------------------------- quarantine

def _manifest_path(qdir):
    return os.path.join(qdir, "manifest.json")


def latest_quarantine(loc):
    p = steplib.read_json(pointer_path(loc))
    if p and p.get("quarantine_dir") and os.path.isdir(p["quarantine_dir"]):
        return p["quarantine_dir"]
    return None


def quarantine(loc, force=False):
    """Copy the three-file image to quarantine/<ts>/copy/ with a sha256 manifest; (dir, manifest)."""
    sc = no_holders(loc, force)
    if not os.path.isfile(loc["db"]):
        raise SwapError("no state.db at %s: nothing to quarantine" % loc["db"])
    denied = hermes_paths.access_problem(loc["db"])
    if denied:
        raise SwapError("permission denied: %s -- fix its ownership/permissions, then re-run" % denied)
    base = os.path.join(loc["fleetops"], "quarantine")
    steplib.makedirs_private(base)
    # a quarantine cut off before its manifest (connection dropped, payload killed) was never
    # pointed at; renamed *.incomplete, nobody takes it for a copy of the original
    leftovers = steplib.set_aside_incomplete(base, os.path.basename(_manifest_path(base)))
    qdir = os.path.join(base, steplib.stamp_dir_name(loc["profile"]))
    os.mkdir(qdir, 0o700)
    cdir = os.path.join(qdir, "copy")
    os.mkdir(cdir, 0o700)
    files = {}
    for s in SIDECARS:
        src = loc["db"] + s
        if not os.path.exists(src):
            continue
        name = "state.db" + s
        before = steplib.file_record(src, sha=False)
        sha = steplib.copy_private(src, os.path.join(cdir, name))
        after = steplib.file_record(src)
        if after["sha256"] != sha or after["size"] != before["size"]:
            raise SwapError("%s changed while it was being copied: a writer is still active; "
                            "stop it and re-run (the partial copy is in %s)" % (src, qdir))
        files[name] = {"size": after["size"], "sha256": sha, "mode": after["mode"], "uid": after["uid"],
                       "gid": after["gid"], "mtime": after["mtime"]}
    fsync_dir(cdir)
    man = {"kind": "fleetops-quarantine", "version": 1, "profile": loc["profile"], "db": loc["db"],
           "created_at": steplib.iso(), "copy_dir": cdir, "files": files, "swaps": [], "rollbacks": [],
           "set_aside": leftovers, "fenced_holders": sc.get("fenced") or []}
    steplib.write_json(_manifest_path(qdir), man)
    steplib.makedirs_private(os.path.dirname(pointer_path(loc)))
    steplib.write_json(pointer_path(loc), {"quarantine_dir": qdir, "profile": loc["profile"], "at": man["created_at"]})
    return qdir, man


def load_manifest(qdir):
    man = steplib.read_json(_manifest_path(qdir)) if qdir else None
    if not man or man.get("kind") != "fleetops-quarantine":
        raise SwapError("no quarantine manifest in %s" % qdir)
    return man


def _current_matches(db, files):
    """Names whose current content differs from the quarantined image (absent counts)."""
    diff = []
    for s in SIDECARS:
        name = "state.db" + s
        path = db + s
        rec = files.get(name)
        if rec is None:
            if os.path.exists(path):
                diff.append("%s appeared" % name)
        elif not os.path.exists(path):
            diff.append("%s is gone" % name)
        elif os.path.getsize(path) != rec["size"] or sha256_file(path) != rec["sha256"]:
            diff.append("%s changed" % name)
    return diff


def _aside_dir(loc, qdir, name):
    """qdir/name when it is on state.db's filesystem (rename works), else a 0700 dir beside state.db."""
    d = os.path.join(qdir, name)
    if sj.same_dev(qdir, loc["home"]):
        steplib.makedirs_private(d)
        return d
    d = os.path.join(loc["home"], ".fleetops-%s-%s" % (name, os.path.basename(qdir)))
    steplib.makedirs_private(d)
    return d


# ---------------------------------------------------------------- swap

def checkpoint_new(path):
    """Fold any WAL of the new file into it and leave no sidecars (an empty -wal/-shm is removed).

    Without a -wal the file is already self-contained and is not opened at all (its sha256,
    reported by the repair, must stay what it was).
    """
    if os.path.exists(path + "-wal"):
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.close()
    for s in ("-wal", "-shm"):
        if os.path.exists(path + s):
            if s == "-wal" and os.path.getsize(path + s):
                raise SwapError("the new file %s still has a non-empty WAL after a checkpoint" % path)
            os.unlink(path + s)  # empty: nothing in it (SQLite's own leftovers of our connection)


def swap(loc, new_db, qdir, expect_sha256=None, force=False, check=False):
    """Move the quarantined original aside and the new file in; returns a summary dict."""
    sc = no_holders(loc, force)
    man = load_manifest(qdir)
    if man.get("db") != loc["db"]:
        raise SwapError("quarantine %s is of %s, not %s" % (qdir, man.get("db"), loc["db"]))
    diff = _current_matches(loc["db"], man["files"])
    if diff:
        raise SwapError("refusing to swap: %s differs from the quarantined image (%s); a writer ran "
                        "since the quarantine. Re-run the repair from the start; nothing was changed."
                        % (loc["db"], ", ".join(diff)))
    stamp = os.path.basename(qdir)
    staged = "%s.fleetops-new-%s" % (loc["db"], stamp)
    reuse = False
    if os.path.lexists(staged):
        # an earlier attempt of this swap staged it and was rolled back: use it if it is the same file
        if (new_db and os.path.exists(new_db)) or (expect_sha256 and sha256_file(staged) != expect_sha256):
            raise SwapError("%s exists already (an earlier attempt?); move it away and re-run" % staged)
        reuse = True
    elif not new_db or not os.path.isfile(new_db):
        raise SwapError("new database %r does not exist" % new_db)
    if check:
        return {"would": "move %s into %s/swapped-out and put %s in its place" % (
            ", ".join(sorted(man["files"])), qdir, new_db)}
    if reuse:
        sha_new = sha256_file(staged)
    else:
        checkpoint_new(new_db)
        sha_new = sha256_file(new_db)
        if expect_sha256 and sha_new != expect_sha256:
            # the repair output is already checkpointed, so its sha256 must be the reported one
            raise SwapError("new file %s has sha256 %s, the repair reported %s" % (new_db, sha_new, expect_sha256))
    orig = os.stat(loc["db"])
    if reuse:
        pass
    elif sj.same_dev(new_db, loc["home"]):
        os.rename(new_db, staged)
    else:
        if steplib.copy_private(new_db, staged) != sha_new:
            raise SwapError("copy of %s to %s does not match" % (new_db, staged))
    try:
        os.chown(staged, orig.st_uid, orig.st_gid)
    except PermissionError:
        pass  # not root: the file is already ours, which is the owner of the original
    os.chmod(staged, 0o600)
    fsync_file(staged)
    fsync_dir(loc["home"])
    out_dir = _aside_dir(loc, qdir, "swapped-out")
    moves = []
    for s in ("-wal", "-shm"):  # sidecars first: the new file never meets the old WAL
        if os.path.exists(loc["db"] + s):
            moves.append(sj.move(loc["db"] + s, os.path.join(out_dir, "state.db" + s), "original" + s,
                               man["files"]["state.db" + s]["sha256"]))
    moves += sj.db_moves(loc["db"], os.path.join(out_dir, "state.db"), "original-db", man["files"]["state.db"]["sha256"],
                       staged, "new", sha_new)
    j = {"id": "swap-%s" % steplib.utc_ts(), "kind": "swap", "profile": loc["profile"], "db": loc["db"],
         "quarantine_dir": qdir, "created_at": steplib.iso(), "moves": moves, "post": {"chmod": "0600"},
         "new_sha256": sha_new}
    fenced = hermes_fence.keepers(loc)
    if fenced:
        # the new file is fenced too before it goes in place: a backend that opens state.db the
        # moment it appears waits there until the old file's holders are gone and the checks done
        hermes_fence.fence_file(loc, staged, "new")
    sj.run_journal(loc, j)
    man["swaps"].append({"journal": j["id"], "at": steplib.iso(), "swapped_out_dir": out_dir, "new_sha256": sha_new,
                         "new_size": os.path.getsize(loc["db"])})
    steplib.write_json(_manifest_path(qdir), man)
    steplib.write_json(os.path.join(qdir, "%s.journal.json" % j["id"]), j)
    lifted = hermes_fence.lift(loc, os.path.join(out_dir, "state.db"), force=force) if fenced else None
    return {"journal": j["id"], "swapped_out_dir": out_dir, "new_sha256": sha_new,
            "moved": [(m["src"], m["dst"]) for m in moves], "fence": lifted,
            "fenced_holders": sc.get("fenced") or []}


# ---------------------------------------------------------------- rollback

def rollback(loc, qdir, force=False, check=False):
    """Put the quarantined original back exactly, moving whatever is there now aside first."""
    no_holders(loc, force)
    man = load_manifest(qdir)
    if man.get("db") != loc["db"]:
        raise SwapError("quarantine %s is of %s, not %s" % (qdir, man.get("db"), loc["db"]))
    if not _current_matches(loc["db"], man["files"]):
        return {"note": "%s already is the quarantined original (sha256 equal); nothing to do" % loc["db"],
                "changed": False}
    # sources: the originals the swap moved aside (rename), else fresh copies of copy/ beside state.db
    sources = {}
    for sw in reversed(man.get("swaps") or []):
        d = sw.get("swapped_out_dir")
        if d and all(os.path.exists(os.path.join(d, n)) for n in man["files"]) and sj.same_dev(d, loc["home"]):
            sources = dict((n, os.path.join(d, n)) for n in man["files"])
            break
    for n, path in sources.items():
        if sha256_file(path) != man["files"][n]["sha256"]:
            sources = {}
            break
    if check:
        return {"would": "move current %s aside into %s/rolled-back-*, restore %s from %s" % (
            loc["db"], qdir, ", ".join(sorted(man["files"])), "swapped-out" if sources else "copy/")}
    stamp = steplib.utc_ts()
    staged = []
    if not sources:
        for n, rec in man["files"].items():
            dst = "%s.fleetops-restore-%s%s" % (loc["db"], stamp, n[len("state.db"):])
            sha = steplib.copy_private(os.path.join(man["copy_dir"], n), dst)
            if sha != rec["sha256"]:
                raise SwapError("the quarantined copy %s does not match its manifest (sha256 %s != %s); "
                                "nothing was changed" % (os.path.join(man["copy_dir"], n), sha, rec["sha256"]))
            sources[n] = dst
            staged.append(dst)
    for n, rec in man["files"].items():
        try:
            os.chown(sources[n], rec["uid"], rec["gid"])
        except (PermissionError, KeyError):
            pass
        os.chmod(sources[n], int(rec.get("mode") or "0600", 8) & 0o666 or 0o600)
    rb_dir = _aside_dir(loc, qdir, "rolled-back-%s" % stamp)
    moves = []
    for s in ("-wal", "-shm"):
        if os.path.exists(loc["db"] + s):
            moves.append(sj.move(loc["db"] + s, os.path.join(rb_dir, "state.db" + s), "current" + s,
                               sha256_file(loc["db"] + s)))
    if os.path.exists(loc["db"]):
        moves += sj.db_moves(loc["db"], os.path.join(rb_dir, "state.db"), "current-db", sha256_file(loc["db"]),
                           sources["state.db"], "original-db", man["files"]["state.db"]["sha256"])
    else:
        moves.append(sj.move(sources["state.db"], loc["db"], "original-db", man["files"]["state.db"]["sha256"]))
    for s in ("-wal", "-shm"):
        n = "state.db" + s
        if n in man["files"]:
            moves.append(sj.move(sources[n], loc["db"] + s, "original" + s, man["files"][n]["sha256"]))
    j = {"id": "rollback-%s" % stamp, "kind": "rollback", "profile": loc["profile"], "db": loc["db"],
         "quarantine_dir": qdir, "created_at": steplib.iso(), "moves": moves, "post": {}}
    fenced = hermes_fence.keepers(loc)
    if fenced:
        hermes_fence.fence_file(loc, sources["state.db"], "original")
    sj.run_journal(loc, j)
    diff = _current_matches(loc["db"], man["files"])
    if diff:
        raise SwapError("rollback finished but %s" % ", ".join(diff))
    man["rollbacks"].append({"journal": j["id"], "at": steplib.iso(), "moved_aside_dir": rb_dir})
    steplib.write_json(_manifest_path(qdir), man)
    steplib.write_json(os.path.join(qdir, "%s.journal.json" % j["id"]), j)
    lifted = hermes_fence.lift(loc, os.path.join(rb_dir, "state.db"), force=force) if fenced else None
    return {"journal": j["id"], "moved_aside_dir": rb_dir, "restored": sorted(man["files"]), "changed": True,
            "fence": lifted}


def lift_text(lifted):
    """The fence part of a swap or rollback message."""
    if not lifted:
        return ""
    pids = ", ".join("%s %s" % (x["kind"], x["pid"]) for x in lifted["swept"])
    if not lifted["ok"]:
        return "; but the fence stays up (until the connection ends): %s" % lifted["reason"]
    return "; %d process(es) still on the old file stopped%s, then the fence lifted (keeper PID %s); %d " \
        "respawned process(es) seen during the repair%s" % (
            lifted["swept_count"], " (%s)" % pids if pids else "", ", ".join(str(p) for p in lifted["released"]),
            lifted["seen_count"], " (PIDs %s)" % ", ".join(str(x["pid"]) for x in lifted["seen"])
            if lifted["seen"] else "")


# ---------------------------------------------------------------- payload

def run(args, action):
    """One image step under the host lock: action quarantine|swap|rollback|recover; args
    {hermes_home?, profile?, new_db?, quarantine_dir?, expect_sha256?, prefer?: finish|rollback,
    force?, run_id?, _check?}. The payloads quarantine, swap and rollback call it."""
    args = args or {}
    check = flag(args.get("_check"))
    force = flag(args.get("force"))
    try:
        loc = steplib.locate(args)
    except ValueError as exc:
        return _result(False, str(exc))
    if action not in ("quarantine", "swap", "rollback", "recover"):
        return _result(False, "unknown action %r" % action)
    if check:
        p = pending(loc)
        try:
            if p:
                return _result(True, "check mode: an interrupted %s (%s) is pending; would %s it first" % (
                    p["kind"], p["id"], args.get("prefer") or "finish"), pending=p["id"])
            qdir = args.get("quarantine_dir") or latest_quarantine(loc)
            if action == "quarantine":
                no_holders(loc, force)
                return _result(True, "check mode: would copy %s (+sidecars) into %s/quarantine/<ts>/" % (
                    loc["db"], loc["fleetops"]))
            if action == "swap":
                w = swap(loc, args.get("new_db"), qdir, check=True, force=force)
            elif action == "rollback":
                w = rollback(loc, qdir, check=True, force=force)
            else:
                w = {"would": "nothing: no interrupted swap pending"}
            return _result(True, "check mode: would %s" % w.get("would", w.get("note")))
        except SwapError as exc:
            return _result(False, "check mode: %s" % exc, refused=True)
    lk, refused = steplib.lock_or_refusal(loc, args, "hermes_%s" % action)
    if refused:
        return refused
    try:
        try:
            recovered = resolve(loc, args.get("prefer") or "finish", force)
        except SwapError as exc:
            return _result(False, str(exc), refused=True)
        extra = {"recovered": recovered} if recovered else {}
        rec_msg = ("interrupted %s %s resolved (%s, %d of %d steps had run); " % (
            recovered["kind"], recovered["id"], recovered["decision"], recovered["steps_done_before"],
            recovered["of"])) if recovered else ""
        if action == "recover":
            return _result(True, rec_msg or "no interrupted swap pending", changed=bool(recovered), **extra)
        if action == "quarantine":
            qdir, man = quarantine(loc, force)
            return _result(True, "%squarantined %s into %s (%s)%s" % (rec_msg, loc["db"], qdir, ", ".join(
                "%s %s" % (n, f["sha256"][:12]) for n, f in sorted(man["files"].items())),
                "".join("; " + n for n in man["set_aside"])), changed=True,
                quarantine_dir=qdir, manifest=man, **extra)
        qdir = args.get("quarantine_dir") or latest_quarantine(loc)
        if not qdir:
            return _result(False, "%sno quarantine found for profile %s: run hermes_quarantine first"
                           % (rec_msg, loc["profile"]), **extra)
        if action == "swap":
            if recovered and recovered["kind"] == "swap" and recovered["decision"] == "finish" and \
                    recovered["quarantine_dir"] == qdir:
                return _result(True, rec_msg + "the swap is complete", changed=True, **extra)
            r = swap(loc, args.get("new_db"), qdir, args.get("expect_sha256"), force=force)
            return _result(not r["fence"] or r["fence"]["ok"], "%sswapped: %s in place (sha256 %s, 0600); "
                           "originals in %s%s" % (rec_msg, loc["db"], r["new_sha256"][:12], r["swapped_out_dir"],
                                                  lift_text(r["fence"])), changed=True, swap=r,
                           quarantine_dir=qdir, **extra)
        r = rollback(loc, qdir, force=force)
        return _result(not r.get("fence") or r["fence"]["ok"], "%s%s%s" % (
            rec_msg, r.get("note") or "rolled back %s to the quarantined original (sha256 checked); what was "
            "there is in %s" % (loc["db"], r["moved_aside_dir"]), lift_text(r.get("fence"))),
                       changed=r.get("changed", True), rollback=r, quarantine_dir=qdir, **extra)
    except SwapError as exc:
        return _result(False, str(exc), refused=True)
    except (OSError, sqlite3.Error) as exc:
        return _result(False, "%s failed: %s: %s (journal %s)" % (action, type(exc).__name__, exc,
                                                                  journal_path(loc)))
    finally:
        lk.release()
