"""Every process holding a profile's state.db, stopped and restarted (stop_writers, start_writers).

Why so thorough (field report 02): the repair refused for hours because four processes held
the file, one not managed by systemd at all; `systemctl stop` was not enough; and the
desktop app respawned `hermes serve --isolated` a minute after it was killed, racing the
swap. So: systemd units first, and any holder found in a unit later, through the manager
(killing a unit's PID just gets it restarted), then `hermes gateway stop` for a pid-file
gateway, then the holder scan by inode, signalling every Hermes holder. Once everything that
was running at the start is gone the store is fenced (hermes_fence: SQLite's own locks, held
until the swap), while respawns are killed on sight: a backend the Desktop app keeps bringing
back can then neither read nor write, so no quiet window is needed (fence: false waits for
one instead). A holder that is not Hermes (a sqlite3 shell, a backup tool) is not ours
to kill: refuse, naming it, with nothing stopped, unless force. What was running is recorded
(~/.hermes/fleetops/state/<profile>-writers.json, written before anything is stopped) so
start_writers can bring back exactly that, gateway first; start lifts a fence still up.

Out of scope: the program that respawns a desktop backend (the Desktop app, over SSH); it is
not restarted by us, it comes back by itself. The recorded environment is the process's full
environment (the gateway may need API keys from it): the file is 0600 in a 0700 directory,
and results only list the variable names.
Stdlib only, Python 3.8+; run(args, action) is what the two payloads call.
"""
import json
import os
import shutil
import signal
import subprocess
import time

from fleetops.remote.hermes import fence as hermes_fence
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import image_swap, steplib
from fleetops.remote.sqlite import fence as sqlite_fence

HERMES_KINDS = hermes_holders.HERMES_KINDS
RESTARTABLE = ("gateway", "dashboard")  # the Desktop app respawns its own backend; a TUI is a person's
DEFAULTS = {"quiet_window": 10.0, "deadline": 120.0, "grace": 10.0, "poll": 0.1,
            "wait_timeout": 120.0, "gateway_stop_timeout": 40.0, "fence_ttl": hermes_fence.DEFAULT_TTL}
ENV_NAMES_SHOWN = 40


def _now():
    return time.monotonic()


def record_path(loc):
    return os.path.join(loc["fleetops"], "state", "%s-writers.json" % loc["profile"])


def _opts(args):
    o = {}
    for k, v in DEFAULTS.items():
        o[k] = steplib.num(args.get(k), v)
    o["force"] = steplib.truthy(args.get("force"))
    o["fence"] = steplib.truthy(args.get("fence", True))
    o["systemd"] = str(args.get("systemd", "auto")).lower()
    o["hermes_bin"] = args.get("hermes_bin") or None
    o["restart_on_failure"] = steplib.truthy(args.get("restart_on_failure", True))
    return o


# ---------------------------------------------------------------- facts about processes

_environ = hermes_holders.environ


def _cwd(pid):
    try:
        return os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        return None


def _exe(pid):
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return None


def cgroup_unit(pid):
    """("user"|"system", "name.service") of the systemd service a process runs in, else None."""
    try:
        with open("/proc/%d/cgroup" % pid, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        path = line.split(":", 2)[-1]
        parts = [p for p in path.split("/") if p]
        services = [p for p in parts if p.endswith(".service")]
        if not services:
            continue
        last = services[-1]
        if last.startswith("user@"):
            return None  # the user manager itself (or a scope under it): not a unit of ours
        scope = "user" if any(p.startswith("user@") and p.endswith(".service") for p in parts) else "system"
        return (scope, last)
    return None


def hermes_command(holder_argv, exe=None, env=None, hermes_bin=None):
    """The argv prefix that runs `hermes` the way this holder was run (interpreter + script or -m)."""
    if hermes_bin:
        return [hermes_bin]
    tokens = hermes_holders._split_argv(list(holder_argv or []))
    end = None
    for i, tok in enumerate(tokens):
        if hermes_holders.hermes_entry(tok):
            end = i
            break
    if end is None:
        return None
    prefix = tokens[:end + 1]
    first = prefix[0]
    if not os.path.isabs(first):
        found = shutil.which(first, path=(env or {}).get("PATH")) if env else None
        if found:
            prefix[0] = found
        elif exe and end > 0:
            prefix[0] = exe  # the interpreter, as the kernel saw it
        else:
            return None
    return prefix


def _holder_facts(h):
    pid = h["pid"]
    env = hermes_holders.environ(pid)
    return {"pid": pid, "kind": h["kind"], "argv": list(h.get("cmdline") or []), "cwd": _cwd(pid),
            "exe": _exe(pid), "env": env, "user": h.get("user"), "uid": h.get("uid"),
            "start_time": (hermes_holders.process_info(pid) or {}).get("start_time"),
            "unit": cgroup_unit(pid)}


def read_pidfile(home):
    """gateway.pid as Hermes writes it (JSON with pid, argv, start_time); None if absent or stale."""
    try:
        with open(os.path.join(home, "gateway.pid"), encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return None
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            data = {"pid": int(data)}
        pid = int(data["pid"])
    except (ValueError, KeyError, TypeError):
        return None
    info = hermes_holders.process_info(pid)
    if info is None or info["state"] == "Z":
        return None
    if data.get("start_time") not in (None, info["start_time"]):
        return None  # pid reused by something else
    data["pid"] = pid
    data["cmdline"] = info["cmdline"]
    return data


# ---------------------------------------------------------------- systemd

def _systemctl_env():
    env = dict(os.environ)
    run_dir = "/run/user/%d" % os.getuid()
    if not env.get("XDG_RUNTIME_DIR") and os.path.isdir(run_dir):
        env["XDG_RUNTIME_DIR"] = run_dir
    return env


def systemctl(scope, *args, **kw):
    """(rc, output) of systemctl [--user] args; rc None when systemctl cannot be run."""
    exe = shutil.which("systemctl")
    if exe is None:
        return None, "no systemctl"
    cmd = [exe] + (["--user"] if scope == "user" else []) + ["--no-pager"] + list(args)
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=kw.get("timeout", 60), env=_systemctl_env())
    except (OSError, subprocess.SubprocessError) as exc:
        return None, str(exc)
    return r.returncode, r.stdout.decode("utf-8", "replace").strip()


def user_manager(opts):
    if opts["systemd"] in ("0", "false", "no", "off"):
        return False
    rc, _ = systemctl("user", "show-environment", timeout=10)
    return rc == 0


def unit_active(scope, name):
    rc, out = systemctl(scope, "is-active", name, timeout=15)
    return rc == 0 and out.strip().splitlines()[-1:] == ["active"]


def gateway_unit_name(profile):
    return "hermes-gateway.service" if profile == "default" else "hermes-gateway-%s.service" % profile


# ---------------------------------------------------------------- the record

def load_record(loc):
    return steplib.read_json(record_path(loc))


def _save(loc, rec):
    steplib.makedirs_private(os.path.dirname(record_path(loc)))
    rec["updated_at"] = steplib.iso()
    steplib.write_json(record_path(loc), rec)


def _public(facts):
    """A holder's facts without its environment values (they may hold secrets)."""
    out = dict((k, v) for k, v in facts.items() if k != "env")
    env = facts.get("env") or {}
    out["env_names"] = sorted(env)[:ENV_NAMES_SHOWN]
    out["env_recorded"] = facts.get("env") is not None
    if "HERMES_HOME" in env:
        out["HERMES_HOME"] = env["HERMES_HOME"]
    return out


def public_record(rec):
    if not rec:
        return rec
    out = dict(rec)
    if rec.get("gateway"):
        out["gateway"] = _public(rec["gateway"])
    out["processes"] = [_public(p) for p in rec.get("processes") or []]
    return out


# ---------------------------------------------------------------- stop

def _refusal(msg, **extra):
    out = {"changed": False, "failed": True, "skipped": False, "refused": True, "msg": msg}
    out.update(extra)
    return out


def _foreign(holders):
    return [h for h in holders if h["kind"] not in HERMES_KINDS]


def _plan(loc, opts, scan):
    """What is running and how each will be stopped; no side effects."""
    plan = {"units": [], "gateway": None, "gateway_stop": None, "processes": [], "problems": []}
    manager = user_manager(opts)
    plan["user_manager"] = manager
    facts = [_holder_facts(h) for h in scan["holders"]]
    units = []
    if manager:
        name = gateway_unit_name(loc["profile"])
        if unit_active("user", name):
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
    pidfile = read_pidfile(loc["home"])
    gw = None
    if pidfile and pidfile["pid"] not in in_unit:
        gw = next((f for f in facts if f["pid"] == pidfile["pid"]), None)
        if gw is None:  # alive but not (yet) holding the file: still a writer to stop
            info = hermes_holders.process_info(pidfile["pid"])
            if info and hermes_holders.classify(info["cmdline"]) == "gateway":
                gw = _holder_facts(dict(info, kind="gateway"))
        if gw is not None:
            cmd = hermes_command(gw["argv"], gw["exe"], gw["env"], opts["hermes_bin"])
            plan["gateway_stop"] = (cmd + ["gateway", "stop"]) if cmd else None
    if gw is None:  # a gateway holder without (a matching) pid file: restart it all the same
        gw = next((f for f in facts if f["kind"] == "gateway" and f["pid"] not in in_unit), None)
    plan["gateway"] = gw
    for f in facts:
        if f["pid"] in in_unit or (gw is not None and f["pid"] == gw["pid"]):
            continue
        f["restart"] = f["kind"] in RESTARTABLE
        plan["processes"].append(f)
    return plan


def _merge_record(loc, plan):
    """The writers record; a previous run's record that was never restarted is kept, not replaced."""
    old = load_record(loc)
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
    opts = _opts(args)
    db = loc["db"]
    if opts["fence"] and not steplib.truthy(args.get("_check")) and hermes_fence.keepers(loc) and \
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
    plan = _plan(loc, opts, scan)
    if plan["problems"] and not opts["force"]:
        return _refusal("refusing to stop writers of %s:\n  %s\nNothing was stopped." % (
            db, "\n  ".join(plan["problems"])), problems=plan["problems"])
    summary = {"units": [u["name"] for u in plan["units"]],
               "gateway": plan["gateway"] and {"pid": plan["gateway"]["pid"], "argv": plan["gateway"]["argv"]},
               "gateway_stop": plan["gateway_stop"],
               "signal": [{"pid": p["pid"], "kind": p["kind"]} for p in plan["processes"]]}
    if steplib.truthy(args.get("_check")):
        n = len(scan["holders"])
        return {"changed": False, "failed": False, "skipped": False, "plan": summary,
                "holders": scan["holders"],
                "msg": "check mode: %s" % ("would stop %d holder(s): units %s, gateway %s, signal %s" % (
                    n, summary["units"] or "-", summary["gateway"]["pid"] if summary["gateway"] else "-",
                    [p["pid"] for p in plan["processes"]] or "-") if n or summary["units"]
                    else "nothing holds %s" % db)}
    rec = _merge_record(loc, plan)
    _save(loc, rec)  # before anything is stopped: an interrupted stop can still be undone
    log = []
    stopped = []
    for u in plan["units"]:
        rc, out = systemctl(u["scope"], "stop", u["name"], timeout=opts["gateway_stop_timeout"] + 60)
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
        _save(loc, rec)
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
                "fenced_holders": res.get("fenced_holders") or [], "record": public_record(rec),
                "record_path": record_path(loc), "log": log}
    rec["status"] = "stopped"
    rec["stop_failed"] = res["reason"]
    _save(loc, rec)
    out = {"changed": bool(stopped), "failed": True, "skipped": False, "stopped": stopped,
           "respawns": res["respawns"], "remaining": res.get("remaining"), "log": log,
           "record_path": record_path(loc)}
    if opts["restart_on_failure"] and stopped:
        st = start(loc, args)  # leave the host as it was
        out["restart"] = st
        out["msg"] = "%s; restarted what was stopped: %s" % (res["reason"], st["msg"])
    else:
        out["msg"] = "%s; what was stopped is recorded in %s (run start_writers to restart it)" % (
            res["reason"], record_path(loc))
    return out


def _stopped_text(s):
    if s.get("unit"):
        return "unit %s" % s["unit"]
    return "%s %s by %s" % (s.get("kind"), s.get("pid"), s.get("how"))


def _stop_unit_of(h, plan, rec, log, done):
    """A holder that runs in a systemd unit is stopped through its manager (a kill would only be
    answered with a restart, Restart=always); the unit is recorded to be started again.
    Returns the stop entry, or None when the holder is in no unit we can stop."""
    u = cgroup_unit(h["pid"])
    if u is None or (u[0] == "user" and not plan.get("user_manager")) or (u[0] == "system" and os.geteuid() != 0):
        return None
    rc, out = systemctl(u[0], "stop", u[1], timeout=120)  # again if it came back: started by someone
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
    start_t = _now()
    last_seen = start_t
    deadline = start_t + opts["deadline"]
    keeper = None
    nameless = {}
    fence = hermes_fence.holding(loc) if opts["fence"] else None
    while True:
        exclude = hermes_fence.pids(loc) | (set([keeper.pid]) if keeper is not None and keeper.pid else set())
        scan = hermes_holders.scan_policy(loc["db"], loc.get("holder_scan") or "strict", exclude_pids=exclude)
        now = _now()
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
                    if h["kind"] in RESTARTABLE and not any(
                            p["argv"] == h.get("cmdline") for p in rec.get("processes") or []) and \
                            not (rec.get("gateway") and rec["gateway"]["argv"] == h.get("cmdline")):
                        f = _holder_facts(h)
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
                log.append({"step": "fenced", "after_s": round(_now() - start_t, 2), "keeper": fence["pid"]})
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


# ---------------------------------------------------------------- start

def spawn_detached(argv, cwd, env, log_path):
    """Run argv in its own session (setsid), reparented to init, output appended to log_path; its PID."""
    steplib.makedirs_private(os.path.dirname(log_path))
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.close(fd)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(r)
            os.setsid()
            pid2 = os.fork()
            if pid2:
                os.write(w, str(pid2).encode())
                os._exit(0)
            os.close(w)
            nul = os.open(os.devnull, os.O_RDONLY)
            logfd = os.open(log_path, os.O_WRONLY | os.O_APPEND)
            os.dup2(nul, 0)
            os.dup2(logfd, 1)
            os.dup2(logfd, 2)
            os.closerange(3, 65536)
            try:
                os.chdir(cwd)
            except OSError:
                os.chdir("/")
            os.umask(0o077)
            os.execvpe(argv[0], argv, env)
        except BaseException:
            pass
        os._exit(127)
    os.close(w)
    data = b""
    while True:
        b = os.read(r, 64)
        if not b:
            break
        data += b
    os.close(r)
    os.waitpid(pid, 0)
    return int(data) if data else None


def _tail(path, n=20):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - 8192))
            return f.read().decode("utf-8", "replace").splitlines()[-n:]
    except OSError:
        return []


def _gateway_holding(db):
    sc = hermes_holders.scan(db)
    return [h for h in sc["holders"] if h["kind"] == "gateway"]


def _wait_holding(db, timeout, pid=None):
    """Wait until a gateway (pid, if given) holds db; returns the holder or None (also if pid died)."""
    end = _now() + timeout
    while True:
        hs = _gateway_holding(db)
        if pid is not None:
            mine = [h for h in hs if h["pid"] == pid]
            if mine:
                return mine[0]
            if not hermes_holders.alive(pid):
                return None
        elif hs:
            return hs[0]
        if _now() >= end:
            return None
        time.sleep(0.5)


def start(loc, args):
    """Restart what stop recorded, gateway first; wait until it holds the database again."""
    opts = _opts(args)
    rec = load_record(loc)
    pend = image_swap.pending(loc)
    if pend and pend.get("db") == loc["db"] and rec and rec.get("status") in ("stopping", "stopped", "restart_failed"):
        return {"changed": False, "failed": True, "skipped": False, "refused": True,
                "msg": "an interrupted %s of %s is pending (journal %s): starting writers now would put "
                       "them on a half-swapped store; run hermes_swap action=recover first"
                       % (pend["kind"], loc["db"], pend["id"])}
    # no swap pending, so the file in place is the one to run on: a fence still up (the no-swap
    # path; the swap lifts it itself once the old file's holders are gone) is lifted first
    fence = [] if steplib.truthy(args.get("_check")) or (pend and pend.get("db") == loc["db"]) else hermes_fence.keepers(loc)
    if not rec or rec.get("status") not in ("stopping", "stopped", "restart_failed"):
        released = hermes_fence.release(loc) if fence else []
        return {"changed": bool(released), "failed": False, "skipped": False, "started": [], "recorded": False,
                "fence_released": released,
                "msg": "nothing recorded as stopped for profile %s: nothing to start%s" % (
                    loc["profile"], "; fence released (keeper PID %s)" % released if released else "")}
    units = rec.get("units") or []
    gw = rec.get("gateway")
    procs = [p for p in rec.get("processes") or [] if p.get("restart")]
    if steplib.truthy(args.get("_check")):
        return {"changed": False, "failed": False, "skipped": False, "recorded": True,
                "record_status": rec.get("status"),
                "msg": "check mode: would start units %s, gateway %s, %d other process(es)" % (
                    [u["name"] for u in units] or "-", " ".join(gw["argv"]) if gw else "-", len(procs))}
    started, errors = [], []
    released = hermes_fence.release(loc) if fence else []
    logs_dir = os.path.join(loc["home"], "logs")
    # gateway first: the units that hold a gateway, then a bare gateway, then the rest
    units = sorted(units, key=lambda u: 0 if "gateway" in u["name"] else 1)
    for u in units:
        rc, out = systemctl(u["scope"], "start", u["name"], timeout=120)
        started.append({"unit": u["name"], "rc": rc, "out": out[-300:]})
        if rc != 0:
            errors.append("systemctl start %s failed (%s): %s" % (u["name"], rc, out[-200:]))
    if units and any("gateway" in u["name"] for u in units):
        h = _wait_holding(loc["db"], opts["wait_timeout"])
        if h is None:
            errors.append("unit started but no gateway holds %s after %.0f s" % (loc["db"], opts["wait_timeout"]))
        else:
            started[-1]["holding_pid"] = h["pid"]
    if gw is not None:
        already = _gateway_holding(loc["db"])
        if already:
            started.append({"kind": "gateway", "pid": already[0]["pid"], "note": "already running"})
        else:
            argv = list(gw["argv"])
            if argv and not os.path.isabs(argv[0]) and gw.get("exe"):
                argv[0] = gw["exe"]
            env = dict(gw.get("env") or os.environ)
            env.setdefault("HERMES_HOME", loc["home"])
            log_path = os.path.join(logs_dir, "fleetops-gateway.log")
            try:
                pid = spawn_detached(argv, gw.get("cwd") or loc["home"], env, log_path)
            except OSError as exc:
                pid = None
                errors.append("cannot start gateway %s: %s" % (" ".join(argv), exc))
            if pid:
                h = _wait_holding(loc["db"], opts["wait_timeout"], pid=pid)
                entry = {"kind": "gateway", "pid": pid, "argv": argv, "log": log_path,
                         "holding": h is not None}
                started.append(entry)
                if h is None:
                    errors.append("gateway PID %d %s; log %s: %s" % (
                        pid, "exited" if not hermes_holders.alive(pid) else
                        "does not hold %s after %.0f s" % (loc["db"], opts["wait_timeout"]),
                        log_path, " | ".join(_tail(log_path, 5))))
    for p in procs:
        argv = list(p["argv"])
        if argv and not os.path.isabs(argv[0]) and p.get("exe"):
            argv[0] = p["exe"]
        log_path = os.path.join(logs_dir, "fleetops-%s.log" % p["kind"])
        try:
            pid = spawn_detached(argv, p.get("cwd") or loc["home"], dict(p.get("env") or os.environ), log_path)
            started.append({"kind": p["kind"], "pid": pid, "argv": argv, "log": log_path})
        except OSError as exc:
            errors.append("cannot start %s %s: %s" % (p["kind"], " ".join(argv), exc))
    rec["status"] = "restart_failed" if errors else "restarted"
    rec["restarted_at"] = steplib.iso()
    rec["started"] = started
    rec["start_errors"] = errors
    _save(loc, rec)
    skipped = rec.get("not_restarted") or []
    note = ("; not restarted (their owner brings them back): %s" % ", ".join(
        "%s %s" % (s["kind"], s["pid"]) for s in skipped)) if skipped else ""
    if released:
        note += "; fence lifted first (keeper PID %s)" % ", ".join(str(p) for p in released)
    if errors:
        return {"changed": bool(started), "failed": True, "skipped": False, "started": started,
                "fence_released": released, "errors": errors, "msg": "; ".join(errors) + note}
    return {"changed": bool(started) or bool(released), "failed": False, "skipped": False, "started": started,
            "fence_released": released,
            "msg": "started %s%s" % (", ".join(
                ("unit %s" % s["unit"]) if s.get("unit") else "%s %s" % (s["kind"], s["pid"])
                for s in started) or "nothing", note)}


def run(args, action):
    """One writers step (stop or start) under the host lock; the payloads stop_writers and
    start_writers call it."""
    args = args or {}
    try:
        loc = steplib.locate(args)
    except ValueError as exc:
        return {"changed": False, "failed": True, "skipped": False, "msg": str(exc)}
    if steplib.truthy(args.get("_check")):
        return stop(loc, args) if action == "stop" else start(loc, args)
    lk, refused = steplib.lock_or_refusal(loc, args, "hermes_%s_writers" % action)
    if refused:
        return refused
    try:
        return stop(loc, args) if action == "stop" else start(loc, args)
    finally:
        lk.release()
