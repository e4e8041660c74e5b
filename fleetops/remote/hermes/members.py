"""Hermes processes of a profile that hold no handle on its state.db: found by who they are.

Why (Hermes 0.21.2+, field issue 35): while a process holds a deleted WAL generation, Hermes
refuses every new process the store at open ("no owning session store … deferring transcript
write"). Such a process holds no descriptor of state.db, so the scan by inode never sees it,
yet it keeps running and replaying pending_messages/; left running it writes into the repaired
file the moment it is swapped in, racing the restart. A member is a Hermes process (by its
command line) of this user whose Hermes home is this profile's: HERMES_HOME in its environment
(else $HOME/.hermes) with its -p/--profile, or an open file under the profile's home (its logs,
pending_messages/), never under another profile's. Stdlib only, Python 3.8+.
"""
import os

from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import paths as hermes_paths

# A Desktop backend opens the store per request and its app respawns it (the fence keeps it out);
# an ACP adapter belongs to an editor. These are what keep retrying on their own.
KINDS = ("gateway", "dashboard", "tui")


def _profile_arg(argv):
    toks = list(argv or [])
    for i, t in enumerate(toks):
        if t in ("-p", "--profile") and i + 1 < len(toks):
            return toks[i + 1].lower()
        if t.startswith("--profile="):
            return t.split("=", 1)[1].lower()
    return None


def _home_of(env, argv):
    root = env.get("HERMES_HOME") or (os.path.join(env["HOME"], ".hermes") if env.get("HOME") else None)
    if not root:
        return None
    prof = _profile_arg(argv)
    return os.path.realpath(hermes_paths.profile_home(root, prof) if prof else root)


def _files_under(pid, home, proc):
    """The first open file of pid under home (another profile's directory excluded), or None."""
    other = os.path.join(home, "profiles") + os.sep
    try:
        fds = os.listdir(os.path.join(proc, str(pid), "fd"))
    except OSError:
        return None
    for fd in fds:
        try:
            target = os.readlink(os.path.join(proc, str(pid), "fd", fd))
        except OSError:
            continue
        if target.startswith(home + os.sep) and not target.startswith(other):
            return target
    return None


def members(loc, exclude_pids=(), proc="/proc"):
    """[holder-shaped dicts with "member": why] for each Hermes process of loc's profile and this user."""
    home = os.path.realpath(loc["home"])
    exclude = set(exclude_pids) | {os.getpid()}
    out = []
    me = os.getuid()
    for name in os.listdir(proc):
        if not name.isdigit() or int(name) in exclude:
            continue
        info = hermes_holders.process_info(int(name), proc)
        if info is None or info.get("state") == "Z" or (me != 0 and info["uid"] != me):
            continue
        env = hermes_holders.environ(int(name), proc) or {}
        kind = hermes_holders.classify(info["cmdline"], env)
        if kind not in KINDS:
            continue
        why = None
        if _home_of(env, hermes_holders.split_argv(info["cmdline"])) == home:
            why = "its Hermes home is %s" % loc["home"]
        else:
            f = _files_under(int(name), home, proc)
            why = f and "it has %s open" % f
        if why:
            h = {k: info.get(k) for k in ("pid", "ppid", "user", "uid", "cmdline")}
            h.update(kind=kind, fds={}, retired=[], member=why)
            out.append(h)
    return out
