"""Payload of the hermes_start_writers module: bring back what hermes_stop_writers stopped.

Exactly what the record says was running, gateway first, each detached from this session and
waited for until it holds the database again; a fence still up is lifted first, and nothing
starts while an interrupted swap is pending.
"""
import os
import time

from fleetops.remote.host.inputs import flag
from fleetops.remote.hermes import fence as hermes_fence
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import image_swap, steplib, writers


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
    end = writers.clock() + timeout
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
        if writers.clock() >= end:
            return None
        time.sleep(0.5)


def start(loc, args):
    """Restart what stop recorded, gateway first; wait until it holds the database again."""
    opts = writers.options(args)
    rec = writers.load_record(loc)
    pend = image_swap.pending(loc)
    if pend and pend.get("db") == loc["db"] and rec and rec.get("status") in ("stopping", "stopped", "restart_failed"):
        return {"changed": False, "failed": True, "skipped": False, "refused": True,
                "msg": "an interrupted %s of %s is pending (journal %s): starting writers now would put "
                       "them on a half-swapped store; run hermes_swap action=recover first"
                       % (pend["kind"], loc["db"], pend["id"])}
    # no swap pending, so the file in place is the one to run on: a fence still up (the no-swap
    # path; the swap lifts it itself once the old file's holders are gone) is lifted first
    fence = [] if flag(args.get("_check")) or (pend and pend.get("db") == loc["db"]) else hermes_fence.keepers(loc)
    if not rec or rec.get("status") not in ("stopping", "stopped", "restart_failed"):
        released = hermes_fence.release(loc) if fence else []
        return {"changed": bool(released), "failed": False, "skipped": False, "started": [], "recorded": False,
                "fence_released": released,
                "msg": "nothing recorded as stopped for profile %s: nothing to start%s" % (
                    loc["profile"], "; fence released (keeper PID %s)" % released if released else "")}
    units = rec.get("units") or []
    gw = rec.get("gateway")
    procs = [p for p in rec.get("processes") or [] if p.get("restart")]
    if flag(args.get("_check")):
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
        rc, out = writers.systemctl(u["scope"], "start", u["name"], timeout=120)
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
    writers.save_record(loc, rec)
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


def main(args):
    """{hermes_home?, profile?, wait_timeout?, systemd?, run_id?, _check?}."""
    return writers.run(args, "start", start)
