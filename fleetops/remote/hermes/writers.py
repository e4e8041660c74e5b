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
This file holds what both steps share: the options, the facts about a writer process and
its systemd unit, the record, and run() under the host lock; the steps themselves are
stop_writers and start_writers.
Stdlib only, Python 3.8+.
"""
import json
import os
import shutil
import subprocess
import time

from fleetops.remote.host.inputs import flag, number
from fleetops.remote.hermes import fence as hermes_fence
from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import steplib

HERMES_KINDS = hermes_holders.HERMES_KINDS
RESTARTABLE = ("gateway", "dashboard")  # the Desktop app respawns its own backend; a TUI is a person's
DEFAULTS = {"quiet_window": 10.0, "deadline": 120.0, "grace": 10.0, "poll": 0.1,
            "wait_timeout": 120.0, "gateway_stop_timeout": 40.0, "fence_ttl": hermes_fence.DEFAULT_TTL}
ENV_NAMES_SHOWN = 40


def clock():
    return time.monotonic()


def record_path(loc):
    return os.path.join(loc["fleetops"], "state", "%s-writers.json" % loc["profile"])


def options(args):
    o = {}
    for k, v in DEFAULTS.items():
        o[k] = number(args.get(k), v)
    o["force"] = flag(args.get("force"))
    o["fence"] = flag(args.get("fence", True))
    o["systemd"] = str(args.get("systemd", "auto")).lower()
    o["hermes_bin"] = args.get("hermes_bin") or None
    o["restart_on_failure"] = flag(args.get("restart_on_failure", True))
    return o


# ---------------------------------------------------------------- facts about processes

proc_environ = hermes_holders.environ


def _cwd(pid):
    try:
        return os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        return None


def proc_exe(pid):
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
    tokens = hermes_holders.split_argv(list(holder_argv or []))
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


def holder_facts(h):
    pid = h["pid"]
    env = hermes_holders.environ(pid)
    return {"pid": pid, "kind": h["kind"], "argv": list(h.get("cmdline") or []), "cwd": _cwd(pid),
            "exe": proc_exe(pid), "env": env, "user": h.get("user"), "uid": h.get("uid"),
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


def save_record(loc, rec):
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


def run(args, action, step):
    """One writers step, step(loc, args) for `action` "stop" or "start", under the host lock; the
    payloads stop_writers and start_writers call it."""
    args = args or {}
    loc, bad = steplib.located(args)
    if bad:
        return bad
    if flag(args.get("_check")):
        return step(loc, args)
    lk, refused = steplib.lock_or_refusal(loc, args, "hermes_%s_writers" % action)
    if refused:
        return refused
    try:
        return step(loc, args)
    finally:
        lk.release()
