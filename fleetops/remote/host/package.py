"""Host-side packages for `package`, `apt` and `dnf`: names present, absent or at the latest
version, through the host's own apt (here) or dnf (remote/host/dnf.py).

What each name needs is decided from dpkg's database and apt's policy first, so an installed
package is never touched by `present`, and `changed` means apt-get was (or, in check mode, would
be) run. Check mode runs only `apt-get -s`, apt's own simulation (what ansible-core's apt module
runs in check mode). A change without root fails before anything runs, naming become as the
remedy. Stdlib only, Python 3.8+.
"""
import fnmatch
import os
import subprocess
import time

from fleetops.remote.host import dnf

STATES = {"present": "present", "installed": "present", "absent": "absent", "removed": "absent",
          "latest": "latest"}
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "DEBCONF_NONINTERACTIVE_SEEN": "true", "LC_ALL": "C"}
APT_OPTS = ["-y", "-q", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"]
APT_LISTS = ("/var/lib/apt/periodic/update-success-stamp", "/var/lib/apt/lists")


def _run(argv, env=None):
    full = dict(os.environ)
    full.update(env or {})
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                           env=full)
    except OSError as exc:
        return 127, "", str(exc)
    return p.returncode, p.stdout, p.stderr


def _fail(msg, **extra):
    out = {"changed": False, "failed": True, "msg": msg}
    out.update(extra)
    return out


def detect():
    if os.path.exists("/usr/bin/apt-get"):
        return "apt"
    return "dnf" if os.path.exists("/usr/bin/dnf") else None


def names_of(raw):
    """`name: a`, `name: a,b` or a list, as ansible-core reads it."""
    if raw is None:
        return []
    items = raw if isinstance(raw, list) else str(raw).split(",")
    return [str(x).strip() for x in items if str(x).strip()]


# ---------------------------------------------------------------- apt

def _apt_policy(name):
    """(installed version or None, candidate version or None, known to apt)."""
    rc, out, _ = _run(["apt-cache", "policy", name], APT_ENV)
    if rc != 0 or not out.strip():
        return None, None, False
    installed = candidate = None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Installed:"):
            installed = line.split(":", 1)[1].strip()
        elif line.startswith("Candidate:"):
            candidate = line.split(":", 1)[1].strip()
    none = (None, "", "(none)")
    return (None if installed in none else installed), (None if candidate in none else candidate), True


def _apt_installed(name):
    rc, out, _ = _run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev}|${Version}\n", name], APT_ENV)
    if rc != 0:
        return None
    status, _, version = out.splitlines()[0].partition("|") if out else ("", "", "")
    return version if status.startswith("ii") else None


def _apt_cache(args, check):
    """(updated, failure): update the lists unless younger than cache_valid_time."""
    valid = int(args.get("cache_valid_time") or 0)
    mtime = next((os.stat(p).st_mtime for p in APT_LISTS if os.path.exists(p)), 0)   # ansible-core's order
    if valid and time.time() - mtime < valid:
        return False, None
    if check:
        return True, None
    rc, out, err = _run(["apt-get", "update", "-q"], APT_ENV)
    if rc != 0:
        return False, "Failed to update apt cache: %s" % (err.strip() or out.strip())
    return True, None


def _apt(names, state, args, check):
    need, problems = [], []
    for spec in names:
        name, eq, version = spec.partition("=")
        installed, candidate, known = _apt_policy(name)
        if state == "absent":
            if _apt_installed(name) is not None:
                need.append(name)
            continue
        if not known or (candidate is None and installed is None):
            problems.append("No package matching '%s' is available" % name)
            continue
        if eq:
            if installed is None or not fnmatch.fnmatch(installed, version):
                need.append(spec)
        elif installed is None or (state == "latest" and candidate and installed != candidate):
            need.append(name)
    if problems:
        return _fail(problems[0])
    if not need:
        return {"changed": False, "failed": False, "msg": ""}
    if state == "absent":
        argv = ["apt-get", "remove"] + APT_OPTS + (["--purge"] if args.get("purge") else []) + need
    else:
        argv = ["apt-get", "install"] + APT_OPTS
        if args.get("install_recommends") is True:
            argv.append("--install-recommends")
        elif args.get("install_recommends") is False:
            argv.append("--no-install-recommends")
        argv += need
    if check:
        argv.insert(2, "-s")
    elif os.geteuid() != 0:
        return _fail("%s %s needs root: set become: true (with a NOPASSWD sudo rule for apt-get)"
                     % (" ".join(argv[:2]), " ".join(need)))
    rc, out, err = _run(argv, APT_ENV)
    if rc != 0:
        return _fail("'%s' failed: %s" % (" ".join(argv), err.strip() or out.strip()), rc=rc, stdout=out, stderr=err)
    if not check:
        still = [n for n in need if (_apt_installed(n.partition("=")[0]) is None) != (state == "absent")]
        if still:
            return _fail("%s ran but %s is still %s" % (argv[1], still[0], "installed" if state == "absent"
                                                         else "not installed"), stdout=out, stderr=err)
    return {"changed": True, "failed": False, "msg": "", "stdout": out, "stderr": err, "packages": need}


def main(args):
    state = STATES.get(args.get("state") or "present")
    if state is None:
        return _fail("state must be one of %s" % ", ".join(sorted(STATES)))
    manager = args.get("manager") or detect()
    names = names_of(args.get("name"))
    check = bool(args.get("_check"))
    if manager == "dnf":
        return dnf.main(names, state, args, check)
    if manager != "apt":
        return _fail("no package manager fleetops drives on this host (it drives apt-get and dnf)")
    cache_updated = False
    if (args.get("update_cache") or (args.get("cache_valid_time") and not names)):
        cache_updated, failure = _apt_cache(args, check)
        if failure:
            return _fail(failure)
    if not names:
        if args.get("update_cache") or args.get("cache_valid_time"):
            return {"changed": cache_updated, "failed": False, "msg": "", "cache_updated": cache_updated}
        return _fail("name is required")
    res = _apt(names, state, args, check)
    res["cache_updated"] = cache_updated
    return res
