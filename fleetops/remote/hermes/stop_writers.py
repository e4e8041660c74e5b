"""Payload of the hermes_stop_writers module: stop every writer of one profile's state.db.

Units through their manager, a pid-file gateway by `hermes gateway stop`, every other Hermes
holder by signal, respawns killed on sight until the fence is up (or a quiet window passed);
a holder that is not Hermes is refused, naming it, with nothing stopped (writers.py says why).
"""
import os
import signal
import subprocess
import time

from fleetops.remote.host.inputs import flag
from fleetops.remote.hermes import fence as hermes_fence
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import members as hermes_members
from fleetops.remote.hermes import retired_wal, start_writers, steplib, writers
from fleetops.remote.sqlite import fence as sqlite_fence


def _refusal(msg, **extra):
    out = {"changed": False, "failed": True, "skipped": False, "refused": True, "msg": msg}
    out.update(extra)
    return out


def _foreign(holders):
    return [h for h in holders if h["kind"] not in writers.HERMES_KINDS]


def _plan(loc, opts, scan):
    """What is running and how each will be stopped; no side effects."""
    plan = {"units": [], "gateway": None, "gateway_stop": None, "processes": [], "problems": []}
    manager = writers.user_manager(opts)
    plan["user_manager"] = manager
    facts = [writers.holder_facts(h) for h in scan["holders"]]
    units = []
    if manager:
        name = writers.gateway_unit_name(loc["profile"])
        if writers.unit_active("user", name):
            units.append({"scope": "user", "name": name, "why": "the profile's gateway unit"})
    for f in facts:
        u = f["unit"]
        if u is None:
            continue
        if u[0] == "user" and not manager:
            plan["problems"].append("PID %d runs in user unit %s but no user manager answers here"
                                    % (f["pid"], u[1]))
            continue
        if u[0] == "system" and os.geteuid() != 0:
            plan["problems"].append("PID %d runs in system unit %s: stop it as root (systemctl stop %s)"
                                    % (f["pid"], u[1], u[1]))
            continue
        if not any(x["name"] == u[1] and x["scope"] == u[0] for x in units):
            units.append({"scope": u[0], "name": u[1], "why": "holds state.db (PID %d, %s)" % (f["pid"], f["kind"])})
    plan["units"] = units
    in_unit = set(f["pid"] for f in facts if f["unit"] and any(
        x["name"] == f["unit"][1] for x in units))
    pidfile = writers.read_pidfile(loc["home"])
    gw = None
    if pidfile and pidfile["pid"] not in in_unit:
        gw = next((f for f in facts if f["pid"] == pidfile["pid"]), None)
        if gw is None:  # alive but not (yet) holding the file: still a writer to stop
            info = hermes_holders.process_info(pidfile["pid"])
            if info and hermes_holders.classify(info["cmdline"]) == "gateway":
                gw = writers.holder_facts(dict(info, kind="gateway"))
        if gw is not None:
            cmd = writers.hermes_command(gw["argv"], gw["exe"], gw["env"], opts["hermes_bin"])
            plan["gateway_stop"] = (cmd + ["gateway", "stop"]) if cmd else None
    if gw is None:  # a gateway holder without (a matching) pid file: restart it all the same
        gw = next((f for f in facts if f["kind"] == "gateway" and f["pid"] not in in_unit), None)
    plan["gateway"] = gw
    for f in facts:
        if f["pid"] in in_unit or (gw is not None and f["pid"] == gw["pid"]):
            continue
        f["restart"] = f["kind"] in writers.RESTARTABLE
        plan["processes"].append(f)
    return plan


def _merge_record(loc, plan):
    """The writers record; a previous run's record that was never restarted is kept, not replaced."""
    old = writers.load_record(loc)
    rec = {"version": 1, "profile": loc["profile"], "db": loc["db"], "home": loc["home"],
           "created_at": steplib.iso(), "status": "stopping", "units": [], "gateway": None,
           "processes": [], "stopped": [], "respawns": [], "runs": 0}
    if old and old.get("status") in ("stopping", "stopped", "restart_failed"):
        rec.update(old)
        rec["merged_from_previous_run"] = True
    rec["status"] = "stopping"
    rec["runs"] = int(rec.get("runs") or 0) + 1
    for u in plan["units"]:
        if not any(x["name"] == u["name"] and x["scope"] == u["scope"] for x in rec["units"]):
            rec["units"].append(u)
    if plan["gateway"] is not None and rec.get("gateway") is None:
        rec["gateway"] = plan["gateway"]
    for p in plan["processes"]:
        if p.get("restart") and not any(x["argv"] == p["argv"] for x in rec["processes"]):
            rec["processes"].append(p)
        elif not p.get("restart"):
            rec.setdefault("not_restarted", []).append(
                {"pid": p["pid"], "kind": p["kind"], "argv": p["argv"]})
    return rec


def stop(loc, args):
    """Stop every writer of loc's state.db; the payload result (module contract)."""
    opts = writers.options(args)
    db = loc["db"]
    if opts["fence"] and not flag(args.get("_check")) and hermes_fence.keepers(loc) and \
            not hermes_fence.holding(loc):
        hermes_fence.release(loc)  # an earlier fence of this run, over a file no longer in place
    scan = hermes_holders.scan_policy(db, loc.get("holder_scan") or "strict", exclude_pids=hermes_fence.pids(loc))
    if scan["status"] != "known" and not opts["force"]:
        return _refusal("cannot tell who holds %s: %s. Run as root or as the user owning the Hermes "
                        "processes (or pass force: true if you know they are idle); nothing was stopped."
                        % (db, scan.get("reason")), holders=scan)
    foreign = _foreign(scan["holders"])
    if foreign and not opts["force"]:
        lines = ["  %s" % hermes_holders.describe(h) for h in foreign]
        return _refusal(
            "refusing to stop writers of %s: %d process(es) that are not Hermes hold it:\n%s\n"
            "They are not ours to stop (a sqlite3 shell, a backup tool): finish or close them "
            "(e.g. `kill %s` once you know they are idle), then re-run; or pass force: true to "
            "stop them as well. Nothing was stopped." % (
                db, len(foreign), "\n".join(lines), " ".join(str(h["pid"]) for h in foreign)),
            foreign=[dict((k, h.get(k)) for k in ("pid", "ppid", "user", "kind", "cmdline")) for h in foreign],
            holders=scan)
    # Hermes processes of this profile that Hermes refused the store at open hold no handle: stop them too
    scan["holders"] = scan["holders"] + hermes_members.members(
        loc, set(h["pid"] for h in scan["holders"]) | hermes_fence.pids(loc))
    plan = _plan(loc, opts, scan)
    if plan["problems"] and not opts["force"]:
        return _refusal("refusing to stop writers of %s:\n  %s\nNothing was stopped." % (
            db, "\n  ".join(plan["problems"])), problems=plan["problems"])
    summary = {"units": [u["name"] for u in plan["units"]],
               "gateway": plan["gateway"] and {"pid": plan["gateway"]["pid"], "argv": plan["gateway"]["argv"]},
               "gateway_stop": plan["gateway_stop"],
               "signal": [{"pid": p["pid"], "kind": p["kind"]} for p in plan["processes"]]}
    if flag(args.get("_check")):
        n = len(scan["holders"])
        return {"changed": False, "failed": False, "skipped": False, "plan": summary,
                "holders": scan["holders"], "proven_unable": scan.get("unable"),
                "msg": "check mode: %s" % ("would stop %d holder(s): units %s, gateway %s, signal %s" % (
                    n, summary["units"] or "-", summary["gateway"]["pid"] if summary["gateway"] else "-",
                    [p["pid"] for p in plan["processes"]] or "-") if n or summary["units"]
                    else "nothing holds %s" % db)}
    rec = _merge_record(loc, plan)
    writers.save_record(loc, rec)  # before anything is stopped: an interrupted stop can still be undone
    # a deleted -wal dies with its last holder: copy it (through /proc/PID/fd/N) while it is open
    captured = retired_wal.capture_open(loc, scan["holders"])
    log = []
    stopped = []
    for u in plan["units"]:
        rc, out = writers.systemctl(u["scope"], "stop", u["name"], timeout=opts["gateway_stop_timeout"] + 60)
        log.append({"step": "systemctl stop", "unit": u["name"], "scope": u["scope"], "rc": rc, "out": out[-500:]})
        stopped.append({"unit": u["name"], "how": "systemctl%s stop" % (" --user" if u["scope"] == "user" else ""),
                        "ok": rc == 0})
    if plan["gateway_stop"]:
        env = dict(plan["gateway"].get("env") or os.environ)
        env["HERMES_HOME"] = loc["home"]  # named explicitly: never follow active_profile
        try:
            r = subprocess.run(plan["gateway_stop"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env=env, cwd=loc["home"],
                               timeout=opts["gateway_stop_timeout"])
            rc, out = r.returncode, r.stdout.decode("utf-8", "replace")
        except (OSError, subprocess.SubprocessError) as exc:
            rc, out = None, str(exc)
        log.append({"step": "hermes gateway stop", "argv": plan["gateway_stop"], "rc": rc, "out": out[-500:]})
        stopped.append({"pid": plan["gateway"]["pid"], "kind": "gateway", "how": "hermes gateway stop",
                        "ok": rc == 0})
    res = _converge(loc, opts, scan, stopped, log, rec, plan)
    rec["stopped"] = (rec.get("stopped") or []) + stopped
    rec["respawns"] = (rec.get("respawns") or []) + res["respawns"]
    if res["ok"]:
        rec["status"] = "stopped"
        rec["stopped_at"] = steplib.iso()
        writers.save_record(loc, rec)
        n_r = len(res["respawns"])
        fence = res.get("fence")
        head = ("fenced %s (its SQLite locks held by keeper PID %d until the swap is done, or the "
                "connection ends)" % (db, fence["pid"])) if fence else \
            "no process holds %s for %.1f s" % (db, opts["quiet_window"])
        return {"changed": bool(stopped) or bool(fence), "failed": False, "skipped": False,
                "msg": "%s: stopped %d (%s)%s" % (
                    head, len(stopped), ", ".join(_stopped_text(s) for s in stopped) or "nothing was running",
                    "; caught %d respawn(s): %s" % (n_r, ", ".join(
                        "%s %d" % (r["kind"], r["pid"]) for r in res["respawns"])) if n_r else ""),
                "stopped": stopped, "respawns": res["respawns"], "respawn_count": n_r,
                "respawn_pids": [r["pid"] for r in res["respawns"]], "fence": fence,
                "fenced_holders": res.get("fenced_holders") or [], "record": writers.public_record(rec),
                "record_path": writers.record_path(loc), "log": log, "retired_captured": captured}
    rec["status"] = "stopped"
    rec["stop_failed"] = res["reason"]
    writers.save_record(loc, rec)
    out = {"changed": bool(stopped), "failed": True, "skipped": False, "stopped": stopped,
           "respawns": res["respawns"], "remaining": res.get("remaining"), "log": log, "retired_captured": captured,
           "record_path": writers.record_path(loc)}
    if opts["restart_on_failure"] and stopped:
        st = start_writers.start(loc, args)  # leave the host as it was
        out["restart"] = st
        out["msg"] = "%s; restarted what was stopped: %s" % (res["reason"], st["msg"])
    else:
        out["msg"] = "%s; what was stopped is recorded in %s (run start_writers to restart it)" % (
            res["reason"], writers.record_path(loc))
    return out


def _stopped_text(s):
    if s.get("unit"):
        return "unit %s" % s["unit"]
    return "%s %s by %s" % (s.get("kind"), s.get("pid"), s.get("how"))


def _stop_unit_of(h, plan, rec, log, done):
    """A holder that runs in a systemd unit is stopped through its manager (a kill would only be
    answered with a restart, Restart=always); the unit is recorded to be started again.
    Returns the stop entry, or None when the holder is in no unit we can stop."""
    u = writers.cgroup_unit(h["pid"])
    if u is None or (u[0] == "user" and not plan.get("user_manager")) or (u[0] == "system" and os.geteuid() != 0):
        return None
    rc, out = writers.systemctl(u[0], "stop", u[1], timeout=120)  # again if it came back: started by someone
    done.add(u)
    log.append({"step": "systemctl stop", "unit": u[1], "scope": u[0], "rc": rc, "out": out[-500:],
                "why": "PID %d appeared in it" % h["pid"]})
    if not any(x["name"] == u[1] and x["scope"] == u[0] for x in rec.get("units") or []):
        rec.setdefault("units", []).append({"scope": u[0], "name": u[1],
                                            "why": "holds state.db (PID %d, %s)" % (h["pid"], h["kind"])})
    return {"pid": h["pid"], "kind": h["kind"], "unit": u[1], "ok": rc == 0,
            "how": "systemctl%s stop %s" % (" --user" if u[0] == "user" else "", u[1])}


def _converge(loc, opts, scan0, stopped, log, rec, plan):
    """Stop Hermes holders (respawns too) until the fence holds the store, or the deadline passes.

    The fence keeper is started once every holder that was running at the start is gone (they
    get to finish their last writes); from then on the holders are respawns, killed on sight,
    and the kernel grants the keeper its lock the moment the last SQLite lock is gone. Without
    the fence (fence: false) it waits for a quiet window with no holder instead.
    """
    initial = set((h["pid"]) for h in scan0["holders"])
    killed_shapes = []
    signalled = {}  # pid -> {"t": first TERM, "kill": bool, "entry": dict}
    respawns = []
    units_done = set(("user" if u["scope"] == "user" else "system", u["name"]) for u in plan["units"])
    start_t = writers.clock()
    last_seen = start_t
    deadline = start_t + opts["deadline"]
    keeper = None
    nameless = {}
    fence = hermes_fence.holding(loc) if opts["fence"] else None
    while True:
        exclude = hermes_fence.pids(loc) | (set([keeper.pid]) if keeper is not None and keeper.pid else set())
        scan = hermes_holders.scan_policy(loc["db"], loc.get("holder_scan") or "strict", exclude_pids=exclude)
        now = writers.clock()
        if scan["status"] != "known" and not opts["force"]:
            if keeper is not None:
                keeper.cancel()
            return {"ok": False, "respawns": respawns,
                    "reason": "holder scan became incomplete: %s" % scan.get("reason")}
        # a process that is exiting still has its files open but no command line any more: give
        # it a moment before it counts as "not Hermes"
        for h in scan["holders"]:
            if not h.get("cmdline"):
                nameless.setdefault(h["pid"], now)
        holders = [h for h in scan["holders"] if h.get("cmdline") or now - nameless[h["pid"]] > 2.0]
        holders += hermes_members.members(loc, set(h["pid"] for h in scan["holders"]) | exclude)
        foreign = _foreign(holders)
        if foreign and not opts["force"]:
            if keeper is not None:
                keeper.cancel()
            return {"ok": False, "respawns": respawns, "remaining": holders,
                    "reason": "a process that is not Hermes started holding %s meanwhile: %s; close it "
                              "and re-run" % (loc["db"], "; ".join(hermes_holders.describe(h) for h in foreign))}
        if holders:
            last_seen = now
        for h in holders:
            pid = h["pid"]
            st = signalled.get(pid)
            if st is None:
                shape = (h["kind"], tuple(h.get("cmdline") or ()))
                if pid not in initial:
                    ev = {"pid": pid, "ppid": h.get("ppid"), "kind": h["kind"], "cmdline": h.get("cmdline"),
                          "respawn": shape in killed_shapes, "seen_after_s": round(now - start_t, 2),
                          "fenced": fence is not None}
                    respawns.append(ev)
                    if h["kind"] in writers.RESTARTABLE and not any(
                            p["argv"] == h.get("cmdline") for p in rec.get("processes") or []) and \
                            not (rec.get("gateway") and rec["gateway"]["argv"] == h.get("cmdline")):
                        f = writers.holder_facts(h)
                        f["restart"] = True
                        rec.setdefault("processes", []).append(f)
                entry = _stop_unit_of(h, plan, rec, log, units_done)
                if entry is None:
                    why = hermes_holders.signal_pid(pid, signal.SIGTERM)
                    entry = {"pid": pid, "kind": h["kind"], "cmdline": h.get("cmdline"), "how": "SIGTERM",
                             "ok": why is None}
                    if why:
                        entry["error"] = why
                        stopped.append(entry)
                        if keeper is not None:
                            keeper.cancel()
                        return {"ok": False, "respawns": respawns, "remaining": holders,
                                "reason": "cannot stop %s: %s" % (hermes_holders.describe(h), why)}
                stopped.append(entry)
                killed_shapes.append(shape)
                signalled[pid] = {"t": now, "kill": bool(entry.get("unit")), "entry": entry}
            elif not st["kill"] and now - st["t"] >= opts["grace"]:
                hermes_holders.signal_pid(pid, signal.SIGKILL)
                st["kill"] = True
                st["entry"]["how"] = "SIGTERM, then SIGKILL after %.0f s" % opts["grace"]
        if opts["fence"]:
            if fence is None and keeper is None and not [h for h in holders if h["pid"] in initial]:
                keeper = hermes_fence.start(loc, loc["db"], ttl=opts["fence_ttl"],
                                            wait=max(1.0, deadline - now))
                log.append({"step": "fence keeper started", "pid": keeper.pid, "after_s": round(now - start_t, 2)})
            if keeper is not None and fence is None:
                try:
                    info = keeper.poll(opts["poll"])
                except sqlite_fence.FenceError as exc:
                    return {"ok": False, "respawns": respawns, "remaining": holders,
                            "reason": "cannot fence %s: %s" % (loc["db"], exc)}
                if info:
                    fence = hermes_fence.adopt(loc, keeper, info, "db")
            if fence is not None:
                log.append({"step": "fenced", "after_s": round(writers.clock() - start_t, 2), "keeper": fence["pid"]})
                hermes_fence.note(loc, respawns, "stopped while the fence was taken")
                return {"ok": True, "respawns": respawns, "fence": fence,
                        "fenced_holders": [h["pid"] for h in holders if h["pid"] not in initial]}
        elif not holders and now - last_seen >= opts["quiet_window"]:
            log.append({"step": "converged", "after_s": round(now - start_t, 2)})
            return {"ok": True, "respawns": respawns}
        if now >= deadline:
            if keeper is not None:
                keeper.cancel()
            desk = [r for r in respawns if r["kind"] == "desktop-serve"]
            hint = (" The desktop backend kept coming back (%d respawns, parent PID %s): close the Hermes "
                    "Desktop app connected to this host, then re-run." % (
                        len(desk), ", ".join(sorted(set(str(r["ppid"]) for r in desk))))) if desk else ""
            owner = sqlite_fence.lock_owner(loc["db"]) if opts["fence"] else None
            return {"ok": False, "respawns": respawns, "remaining": holders,
                    "reason": "deadline of %.0f s passed and %s still held by %s.%s" % (
                        opts["deadline"], loc["db"],
                        ", ".join(hermes_holders.describe(h) for h in holders) or (
                            "PID %s (a SQLite lock on it, so the fence could not be taken)" % owner
                            if owner else "processes that came and went (no quiet window of %.1f s)"
                            % opts["quiet_window"]), hint)}
        if keeper is None or fence is not None:
            time.sleep(opts["poll"])


def main(args):
    """{hermes_home?, profile?, quiet_window?, deadline?, grace?, force?, hermes_bin?, systemd?,
    restart_on_failure?, fence?, fence_ttl?, run_id?, _check?}."""
    return writers.run(args, "stop", stop)
