"""`systemctl --user` for the connecting user: daemon-reload, enable/disable, start/stop/restart.

Why the environment work: an SSH session (or cron) often has no XDG_RUNTIME_DIR or
DBUS_SESSION_BUS_ADDRESS, and then `systemctl --user` cannot find the user manager
even when it runs; both are derived from the uid (/run/user/UID) when unset.
When no user manager answers (no systemd, no lingering, a container) the result is
`manager: false` and skipped, never failed, so a playbook can branch to another path
(cron). With no `name` the call is only that probe. `_check` reports what would
change and runs nothing that changes state. Generic, stdlib only, Python 3.8+.
"""
import os
import shutil
import subprocess

from fleetops.remote.host.contract import result

TIMEOUT = 60


class Fail(Exception):
    """A systemctl call failed: becomes {failed: true, msg}."""


def user_env():
    env = dict(os.environ)
    if not env.get("XDG_RUNTIME_DIR"):
        env["XDG_RUNTIME_DIR"] = "/run/user/%d" % os.getuid()
    bus = os.path.join(env["XDG_RUNTIME_DIR"], "bus")
    if not env.get("DBUS_SESSION_BUS_ADDRESS") and os.path.exists(bus):
        env["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=%s" % bus
    return env


def systemctl(systemctl_path, env, *argv):
    try:
        proc = subprocess.run([systemctl_path, "--user"] + list(argv), env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %d s" % TIMEOUT
    return (proc.returncode, proc.stdout.decode("utf-8", "replace").strip(),
            proc.stderr.decode("utf-8", "replace").strip())


def probe(path, env):
    """(answers, why): does a user manager answer on this host for this user?"""
    if path is None:
        return False, "no systemctl on this host"
    if not os.path.isdir(env["XDG_RUNTIME_DIR"]):
        return False, "%s does not exist (no user session; lingering off?)" % env["XDG_RUNTIME_DIR"]
    rc, out, err = systemctl(path, env, "show-environment")
    if rc != 0:
        return False, (err or out or "systemctl --user show-environment rc %d" % rc).splitlines()[0]
    return True, ""


def _must(path, env, *argv):
    rc, out, err = systemctl(path, env, *argv)
    if rc != 0:
        raise Fail("systemctl --user %s failed (rc %d): %s" % (" ".join(argv), rc, (err or out or "no message")))
    return out


def main(args):
    args = args or {}
    check = bool(args.get("_check"))
    name = args.get("name")
    state = args.get("state")
    enabled = args.get("enabled")
    if state not in (None, "", "started", "stopped", "restarted"):
        return result(failed=True, msg="state must be started, stopped or restarted, got %r" % (state,))
    if (state or enabled is not None) and not name:
        return result(failed=True, msg="name is required with state or enabled")
    path = shutil.which("systemctl")
    env = user_env()
    answers, why = probe(path, env)
    if not answers:
        return result(skipped=True, manager=False, msg="no systemd user manager answers: %s" % why)
    try:
        return _manage(path, env, name, state, enabled, bool(args.get("daemon_reload")), check)
    except Fail as exc:
        return result(failed=True, manager=True, msg=str(exc))


def _manage(path, env, name, state, enabled, daemon_reload, check):
    done = []
    if daemon_reload:
        if not check:
            _must(path, env, "daemon-reload")
        done.append("daemon-reload")
    out = {"manager": True, "name": name}
    if name and enabled is not None:
        rc, now, err = systemctl(path, env, "is-enabled", name)
        now = (now.splitlines() or [""])[-1]
        if not now:
            if "no such file" not in err.lower() and "not found" not in err.lower():
                raise Fail("systemctl --user is-enabled %s failed (rc %d): %s" % (name, rc, err or "no message"))
            now = "not-found"
        out["enabled_before"] = now
        is_on = now in ("enabled", "enabled-runtime")
        if enabled and now == "not-found" and not check:
            raise Fail("unit %s not found: %s" % (name, err or now))
        if bool(enabled) != is_on and not (not enabled and now == "not-found"):
            verb = "enable" if enabled else "disable"
            if not check:
                _must(path, env, verb, name)
            done.append("%s %s" % (verb, name))
    if name and state:
        rc, active, _ = systemctl(path, env, "is-active", name)
        out["active_before"] = active
        verb = None
        if state == "started" and active not in ("active", "activating", "reloading"):
            verb = "start"
        elif state == "stopped" and active in ("active", "activating", "reloading"):
            verb = "stop"
        elif state == "restarted":
            verb = "restart"
        if verb:
            if not check:
                _must(path, env, verb, name)
            done.append("%s %s" % (verb, name))
    if done:
        msg = ("would " if check else "") + ", ".join(done)
    else:
        msg = "user manager answers" if not name else "%s already as wanted" % name
    return result(changed=bool(done), msg=msg, actions=done, **out)
