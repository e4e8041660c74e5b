"""A systemd unit's state, enablement and mask, decided from what systemctl reports, as
ansible.builtin.systemd_service decides them: `systemctl show` before anything is done (its
properties come back as `status`), then mask/unmask, enable/disable, start/stop/restart/reload,
each only when the unit is not already so (restarted and reloaded always act on a running
unit). daemon-reload and daemon-reexec run first and change nothing reported. Check mode
decides the same and runs nothing that changes state. Generic, stdlib only, Python 3.8+.
"""
import glob
import os
import shutil
import subprocess

from fleetops.remote.host.contract import result
from fleetops.remote.host.systemd_user import user_env

TIMEOUT = 300
STATES = ("started", "stopped", "restarted", "reloaded")
SCOPES = ("system", "user", "global")
# what `systemctl is-enabled` prints for a unit systemd knows, whatever its enablement
KNOWN = ("enabled", "enabled-runtime", "linked", "linked-runtime", "masked", "masked-runtime", "static",
         "indirect", "disabled", "generated", "transient", "alias")


class Fail(Exception):
    """Ends the task failed with this message (and what is known so far)."""


def parse_show(text):
    """`systemctl show` output as a dict; an Exec*= value in braces may span several lines."""
    props = {}
    key, parts = None, []
    for line in text.split("\n"):
        if key is not None:
            parts.append(line)
            if line.rstrip().endswith("}"):
                props[key] = "\n".join(parts).strip()
                key, parts = None, []
            continue
        if "=" not in line:
            continue
        k, v = line.split("=", 1)
        if k.startswith("Exec") and v.lstrip().startswith("{") and not v.rstrip().endswith("}"):
            key, parts = k, [v]
            continue
        props[k] = v.strip()
    return props


class Systemctl(object):
    """systemctl with the scope's and the task's flags, run with a time limit."""

    def __init__(self, path, scope, no_block, force):
        self.argv = [path] + (["--" + scope] if scope != "system" else []) + (["--no-block"] if no_block else []) \
            + (["--force"] if force else [])
        self.env = user_env() if scope != "system" else dict(os.environ)

    def __call__(self, *argv):
        try:
            proc = subprocess.run(self.argv + list(argv), env=self.env, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return 124, "", "timed out after %d s" % TIMEOUT
        return (proc.returncode, proc.stdout.decode("utf-8", "replace"),
                proc.stderr.decode("utf-8", "replace"))


def _sysv(name):
    """(an init script exists, it is enabled in some runlevel)."""
    script = os.path.join("/etc/init.d", name)
    return os.path.isfile(script), bool(glob.glob("/etc/rc?.d/S??" + glob.escape(name)))


def main(args):
    args = args or {}
    name = args.get("name")
    state = args.get("state")
    scope = args.get("scope") or "system"
    if state not in (None,) + STATES:
        return result(failed=True, msg="state must be one of %s, got %r" % (", ".join(STATES), state))
    if scope not in SCOPES:
        return result(failed=True, msg="scope must be one of %s, got %r" % (", ".join(SCOPES), scope))
    if name is None and (state or args.get("enabled") is not None or args.get("masked") is not None):
        return result(failed=True, msg="name is required with state, enabled or masked")
    if name is not None and any(c in name for c in "*?["):
        return result(failed=True, msg="a unit name cannot be a glob pattern: %s" % name)
    path = shutil.which("systemctl")
    if path is None:
        return result(failed=True, msg="no systemctl on this host: it is not managed by systemd")
    ctl = Systemctl(path, scope, bool(args.get("no_block")), bool(args.get("force")))
    out = {"name": name, "status": {}}
    try:
        return _manage(ctl, args, out)
    except Fail as exc:
        # as ansible-core's: a failure carries its message only (the unit's state is not known)
        return result(failed=True, msg=str(exc))


def _manage(ctl, args, out):
    check = bool(args.get("_check"))
    name = args.get("name")
    done = []
    for flag, verb in (("daemon_reload", "daemon-reload"), ("daemon_reexec", "daemon-reexec")):
        if args.get(flag) and not check:
            rc, o, err = ctl(verb)
            if rc != 0:
                raise Fail("%s failed (rc %d): %s" % (verb, rc, (err or o).strip()))
            done.append(verb)
    changed = False
    if name is not None:
        found, why = _lookup(ctl, name, out)
        changed |= _masked(ctl, name, args.get("masked"), check, found, done)
        changed |= _enabled(ctl, name, args.get("enabled"), args.get("scope") or "system", check, found, out, done)
        changed |= _state(ctl, name, args.get("state"), check, found, why, out, done)
    msg = ("would " if check and done else "") + ", ".join(done) if done else "nothing to do"
    return result(changed=changed, msg=msg, actions=done, **out)


def _lookup(ctl, name, out):
    """Read the unit's properties into out['status']: (systemd or an init script knows the unit,
    why `systemctl show` gave none)."""
    rc, o, err = ctl("show", name)
    if rc == 0 and "=" in o:
        out["status"] = parse_show(o)
        load = out["status"].get("LoadState")
        if load is not None and load not in ("not-found", "masked") and "LoadError" in out["status"]:
            raise Fail("Error loading unit file '%s': %s" % (name, out["status"]["LoadError"]))
        return (load is not None and load != "not-found") or _sysv(name)[0], ""
    why = (err or o).strip().splitlines()[0] if (err or o).strip() else "systemctl show rc %d" % rc
    # no manager answers (not booted with systemd, no bus): the unit files still say what is known
    known = ctl("is-enabled", name)[1].strip() in KNOWN or ctl("list-unit-files", name)[0] == 0
    return known or _sysv(name)[0], why


def _masked(ctl, name, want, check, found, done):
    if want is None:
        return False
    now = ctl("is-enabled", name)[1].strip() == "masked"
    if now == bool(want):
        return False
    verb = "mask" if want else "unmask"
    if not check:
        rc, o, err = ctl(verb, name)
        if rc != 0:
            if not found:
                raise Fail("Could not find the requested service %s: host" % name)
            raise Fail("Failed to %s the service (%s): %s" % (verb, name, err.strip()))
    done.append("%s %s" % (verb, name))
    return True


def _enabled(ctl, name, want, scope, check, found, out, done):
    if want is None:
        return False
    if not found:
        raise Fail("Could not find the requested service %s: host" % name)
    rc, o, _ = ctl("is-enabled", name, "-l")
    if rc == 0:
        # enabled for this boot only, through another unit, or an alias: enabling is still asked for
        now = o.strip() not in ("enabled-runtime", "indirect", "alias")
    else:
        init_script, sysv_on = _sysv(name)
        now = rc == 1 and scope == "system" and init_script and not o.strip().endswith("disabled") and sysv_on
    out["enabled"] = bool(now)
    if bool(now) == bool(want):
        return False
    verb = "enable" if want else "disable"
    if not check:
        rc, o, err = ctl(verb, name)
        if rc != 0:
            raise Fail("Unable to %s service %s: %s" % (verb, name, (o + err).strip()))
    out["enabled"] = bool(want)
    done.append("%s %s" % (verb, name))
    return True


def _state(ctl, name, want, check, found, why, out, done):
    if not want:
        return False
    if not found:
        raise Fail("Could not find the requested service %s: host" % name)
    out["state"] = "started" if want in ("restarted", "reloaded") else want
    active = out["status"].get("ActiveState")
    if active is None:
        raise Fail("Service is in unknown state" + (": " + why if why else ""))
    running = active in ("active", "activating")
    verb = None
    if want == "started" and not running:
        verb = "start"
    elif want == "stopped" and (running or active == "deactivating"):
        verb = "stop"
    elif want in ("restarted", "reloaded"):
        verb = want[:-2] if running else "start"
    if verb is None:
        return False
    if not check:
        rc, _o, err = ctl(verb, name)
        if rc != 0:
            raise Fail("Unable to %s service %s: %s" % (verb, name, err.strip()))
    done.append("%s %s" % (verb, name))
    return True
