"""dnf packages present, absent or at the latest version, decided as ansible.builtin.dnf decides
them, through the host's own dnf command.

`dnf --assumeno` (dnf's own resolution, which changes nothing) says whether a transaction is
needed and what it would install or remove, so `changed` means dnf ran (or, in check mode,
would have); a real run is `dnf -y`, and its `results` are what rpm's database gained and lost.
`latest` upgrades the names installed and installs the others, as ansible-core marks them.
Stdlib only, Python 3.8+.
"""
import os
import re
import subprocess

from fleetops.remote.host.contract import result

ENV = {"LC_ALL": "C", "LANG": "C"}
# rpm's name for a package as dnf prints it: name-[epoch:]version-release.arch
QF = "%{NAME}-%|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}.%{ARCH}\\n"
NO_MATCH = re.compile(r"^No match for argument: (.+)$", re.M)
SECTION = re.compile(r"^(Installing|Upgrading|Reinstalling|Downgrading|Removing|Installing dependencies|"
                     r"Removing dependent packages|Installing weak dependencies|Removing unused dependencies):$")


def _run(argv):
    env = dict(os.environ)
    env.update(ENV)
    try:
        p = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, env=env)
    except OSError as exc:
        return 127, "", str(exc)
    return p.returncode, p.stdout, p.stderr


def _result(changed=False, failed=False, msg="", results=None, **extra):
    """The contract with ansible-core's dnf keys: `results` (what was done) and `rc`."""
    return result(changed, failed, msg, results=list(results or []), rc=1 if failed else 0, **extra)


def options(args):
    """dnf's command-line options for the task's arguments."""
    opts = []
    if args.get("disable_gpg_check"):
        opts.append("--nogpgcheck")
    for flag, key in (("--disablerepo=", "disablerepo"), ("--enablerepo=", "enablerepo")):
        value = args.get(key) or []
        for repo in (value if isinstance(value, list) else str(value).split(",")):
            if str(repo).strip():
                opts.append(flag + str(repo).strip())
    if args.get("releasever"):
        opts.append("--releasever=" + str(args["releasever"]))
    if args.get("installroot") and args["installroot"] != "/":
        opts.append("--installroot=" + str(args["installroot"]))
    if args.get("conf_file"):
        opts += ["-c", str(args["conf_file"])]
    return opts


def installed(args):
    """Every installed package, as dnf names them (the installroot's database where one is given)."""
    root = args.get("installroot") or "/"
    rc, out, _ = _run(["rpm", "-qa", "--root", root, "--qf", QF])
    return set(out.split()) if rc == 0 else set()


def _is_installed(name, args):
    root = args.get("installroot") or "/"
    return _run(["rpm", "-q", "--root", root, "--whatprovides", name])[0] == 0


def planned(out):
    """(to install, to remove) from the transaction table `dnf --assumeno` prints."""
    add, drop, section = [], [], None
    for line in out.splitlines():
        head = SECTION.match(line.strip())
        if head:
            section = head.group(1)
            continue
        if not line.startswith(" ") or section is None:
            section = None if line.strip() and not line.startswith(" ") else section
            continue
        words = line.split()
        if len(words) >= 4:
            nevra = "%s-%s.%s" % (words[0], words[2], words[1])
            (drop if section.startswith("Removing") else add).append(nevra)
    return add, drop


def _resolve(verb, specs, args):
    """dnf's resolution of one transaction, nothing changed: (needed, would install, would
    remove, names no repository has, error)."""
    base = ["dnf"] + options(args)
    rc, out, err = _run(base + ["--assumeno", verb] + specs)
    text = out + "\n" + err
    missing = NO_MATCH.findall(text)
    aborted = "Operation aborted" in text
    if rc != 0 and not aborted:
        errors = [line[len("Error: "):] for line in text.splitlines() if line.startswith("Error: ")]
        return False, [], [], missing, (errors[-1] if errors else (err or out).strip() or "dnf rc %d" % rc)
    add, drop = planned(out)
    return aborted, add, drop, missing, None


def main(names, state, args, check):
    if os.geteuid() != 0 and not check:
        return _result(failed=True, msg="This command has to be run under the root user.")
    if args.get("update_cache") and not check:
        rc, out, err = _run(["dnf"] + options(args) + ["makecache"])
        if rc != 0:
            return _result(failed=True, msg="Failed to synchronize repodata: %s" % (err or out).strip())
    if not names:
        return _result(msg="Cache updated") if args.get("update_cache") else _result(failed=True, msg="name is required")
    if state == "absent":
        plan = [("remove", names)]
    elif state == "latest":
        have = [n for n in names if _is_installed(n, args)]
        plan = [("upgrade", have), ("install", [n for n in names if n not in have])]
    else:
        plan = [("install", names)]
    before = installed(args)
    failures, would_add, would_drop, needed, notes = [], [], [], [], []
    for verb, specs in plan:
        if not specs:
            continue
        need, add, drop, missing, error = _resolve(verb, specs, args)
        if error is not None:
            failures += ["No package %s available." % m for m in missing] or [error]
            continue
        if verb != "remove":
            failures += ["No package %s available." % m for m in missing]
        else:                     # nothing to remove is not a failure; ansible-core says so in results
            notes += ["No match for argument: %s" % m for m in missing]
        if need:
            needed.append((verb, specs))
            would_add += add
            would_drop += drop
    if failures:
        return _result(failed=True, msg="Failed to install some of the specified packages", failures=failures)
    if not needed:
        return _result(msg="Nothing to do", results=notes)
    results = notes + ["Installed: %s" % p for p in would_add] + ["Removed: %s" % p for p in would_drop]
    if check:
        return _result(changed=True, msg="Check mode: No changes made, but would have if not in check mode",
                       results=results)
    for verb, specs in needed:
        rc, out, err = _run(["dnf"] + options(args) + ["-y", verb] + specs)
        if rc != 0:
            return _result(failed=True, msg="Failed to install some of the specified packages",
                           failures=[(err or out).strip()])
    after = installed(args)
    results = (notes + ["Installed: %s" % p for p in sorted(after - before)]
               + ["Removed: %s" % p for p in sorted(before - after)])
    return _result(changed=True, results=results)
