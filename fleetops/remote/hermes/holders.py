"""Which processes hold a Hermes state.db (or its -wal/-shm), found through /proc/*/fd.

Matching is by (st_dev, st_ino) of the open file, not by path text, so bind mounts
and symlinked homes are found; a link reading "<db>-wal (deleted)" whose inode is not
the one at the path is a retired WAL generation, which must be stopped, never fixed.
Fail closed: a process whose fd table cannot be read makes the answer "unknown",
never "none" (the repair's stop-writers step relies on that), unless it is proven unable to
open the store: on a shared host another user's process whose /proc/PID/status (readable by
anyone) shows no uid that is root or the store's owner and no DAC-override capability cannot
open a store whose files and directory admit nobody else by their modes. Stdlib only, Python 3.8+.
"""
import os
import pwd

ROLES = (("db", ""), ("wal", "-wal"), ("shm", "-shm"))
KINDS = ("gateway", "dashboard", "desktop-serve", "tui", "acp", "cli", "sqlite-shell", "unknown")
# How Hermes runs, 0.19 to upstream: its console scripts (0.20.1's axisrow build renames them
# hermesx*), `python -m hermes_cli.main` / `-m acp_adapter`, or the scripts themselves
EXECUTABLES = ("hermes", "hermes-agent", "hermes-acp", "hermesx", "hermesx-agent", "hermesx-acp")
MODULES = ("hermes_cli.main", "hermes_cli")
SCRIPTS = ("hermes_cli/main.py", "run_agent.py")
ACP = ("hermes-acp", "hermesx-acp", "acp_adapter", "acp_adapter.main")
HERMES_KINDS = ("gateway", "dashboard", "desktop-serve", "tui", "acp", "cli")  # ours to stop
_PF_KTHREAD = 0x00200000
_SKIP_PREFIXES = ("socket:", "pipe:", "anon_inode:", "/dev/", "/proc/", "/sys/", "[")
_OPT_WITH_VALUE = ("-p", "--profile")


def _user(uid):
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, TypeError):
        return str(uid)


def file_ids(db_path):
    """{role: {"path", "dev", "ino"}} for whichever of state.db, -wal, -shm exist now."""
    out = {}
    for role, suffix in ROLES:
        path = db_path + suffix
        try:
            st = os.stat(path)
        except OSError:
            continue
        out[role] = {"path": path, "dev": st.st_dev, "ino": st.st_ino}
    return out


def split_argv(argv):
    """argv as tokens; a process that rewrote its title (exec -a, setproctitle) has one spaced argv[0]."""
    argv = [a for a in argv if a != ""]
    if argv and " " in argv[0] and not os.path.exists(argv[0]):
        return argv[0].split() + argv[1:]
    return argv


def hermes_entry(tok):
    """True for the token that starts Hermes itself: its executable, module or script."""
    return os.path.basename(tok) in EXECUTABLES or tok in MODULES or tok.endswith(SCRIPTS)


def classify(argv, environ=None):
    """gateway / dashboard / desktop-serve / tui / acp / cli / sqlite-shell / unknown, from the
    command line; environ (the process's, if known) marks a Desktop-spawned backend
    (HERMES_DESKTOP=1) whatever its command line says."""
    tokens = split_argv(list(argv or []))
    if not tokens:
        return "unknown"
    if os.path.basename(tokens[0]).startswith("sqlite3"):
        return "sqlite-shell"
    start = None
    for i, tok in enumerate(tokens):
        base = os.path.basename(tok)
        if tok.startswith("tui_gateway"):
            return "tui"
        if base in ACP or tok in ACP:
            return "desktop-serve" if (environ or {}).get("HERMES_DESKTOP") == "1" else "acp"
        if hermes_entry(tok):
            start = i + 1
            break
    if start is None:
        return "unknown"
    if (environ or {}).get("HERMES_DESKTOP") == "1":
        return "desktop-serve"
    sub = []
    i = start
    while i < len(tokens):
        tok = tokens[i]
        if tok in _OPT_WITH_VALUE:
            i += 2
            continue
        if not tok.startswith("-"):
            sub.append(tok)
        i += 1
    if not sub or sub[0] == "chat":
        return "tui"
    opts = set(tokens[start:])
    if sub[0] == "gateway":
        return "gateway" if len(sub) == 1 or sub[1] == "run" else "cli"
    if sub[0] == "dashboard":
        return "cli" if "--stop" in opts else "dashboard"
    if sub[0] == "serve":
        return "desktop-serve"
    return "cli"


def process_info(pid, proc="/proc"):
    """pid, ppid, uid, user, cmdline (list), start_time (clock ticks), state; None if it is gone."""
    base = os.path.join(proc, str(pid))
    try:
        with open(os.path.join(base, "stat"), "rb") as f:
            stat = f.read().decode("utf-8", "replace")
        uid = os.stat(base).st_uid
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2:].split()
    try:
        with open(os.path.join(base, "cmdline"), "rb") as f:
            raw = f.read()
    except OSError:
        raw = b""
    cmdline = [a.decode("utf-8", "replace") for a in raw.split(b"\0")]
    while cmdline and cmdline[-1] == "":
        cmdline.pop()
    return {
        "pid": int(pid),
        "ppid": int(rest[1]) if len(rest) > 1 else None,
        "state": rest[0] if rest else "?",
        "flags": int(rest[6]) if len(rest) > 6 else 0,
        "start_time": int(rest[19]) if len(rest) > 19 else None,
        "uid": uid,
        "user": _user(uid),
        "cmdline": cmdline,
    }


def _peek(pid, proc, user_names):
    """(uid, argv) of a process whose fds we may not read, or None for a kernel thread, a
    zombie or one that is gone. Most of a host's processes are other users' and land here,
    so it reads one file, and stat only when argv is empty (kernel threads and zombies have
    none; a live process that cleared its argv is still counted)."""
    base = os.path.join(proc, str(pid))
    try:
        uid = os.stat(base).st_uid
        with open(os.path.join(base, "cmdline"), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    if uid not in user_names:
        user_names[uid] = _user(uid)
    argv = [a.decode("utf-8", "replace") for a in raw.split(b"\0")]
    while argv and argv[-1] == "":
        argv.pop()
    if not argv:
        info = process_info(pid, proc)
        if info is None or info["state"] == "Z" or info["flags"] & _PF_KTHREAD:
            return None
    return uid, argv


def environ(pid, proc="/proc"):
    """The process's environment as a dict (None when it cannot be read)."""
    try:
        with open(os.path.join(proc, str(pid), "environ"), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    env = {}
    for item in raw.split(b"\0"):
        if b"=" in item:
            k, v = item.split(b"=", 1)
            env[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return env


def alive(pid, proc="/proc"):
    """True while /proc/PID exists and is not a zombie."""
    info = process_info(pid, proc)
    return info is not None and info["state"] != "Z"


def _hidepid(proc):
    """A /proc mounted with hidepid hides other users' processes entirely: the scan cannot be complete."""
    try:
        with open(os.path.join(proc, "self", "mountinfo"), encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 4 and parts[4] == proc and "hidepid=" in line:
                    for opt in line.split(" - ", 1)[-1].split()[-1].split(","):
                        if opt.startswith("hidepid=") and opt.split("=", 1)[1] not in ("0", "off"):
                            return True
    except OSError:
        pass
    return False


def signal_pid(pid, sig):
    """None on success, else the reason (gone is success: it stopped)."""
    try:
        os.kill(pid, sig)
        return None
    except ProcessLookupError:
        return None
    except PermissionError:
        return "permission denied (PID %d belongs to another user)" % pid


# CAP_DAC_OVERRIDE (1) and CAP_DAC_READ_SEARCH (2): either lets a process open a file its mode refuses
_DAC_CAPS = (1 << 1) | (1 << 2)


def private_owner(db_path):
    """The owner's uid when state.db and its sidecars admit nobody else by their modes (no group or
    other bits: a POSIX ACL's mask is those bits, so no ACL entry can let anyone in either), and
    its directory is not writable by others; else None."""
    owner = None
    for path in [db_path + s for _r, s in ROLES] + [os.path.dirname(os.path.abspath(db_path))]:
        try:
            st = os.stat(path)
        except OSError:
            continue
        is_dir = path == os.path.dirname(os.path.abspath(db_path))
        if (st.st_mode & (0o022 if is_dir else 0o077)) or (owner is not None and st.st_uid != owner):
            return None
        owner = st.st_uid
    return owner


def cannot_open(pid, owner_uid, proc="/proc"):
    """True when /proc/PID/status (readable by anyone) proves the process cannot open a file only
    `owner_uid` may: none of its real, effective, saved and filesystem uids is root or the owner,
    and its effective capabilities hold neither DAC override."""
    try:
        with open(os.path.join(proc, str(pid), "status"), "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return False
    uids = caps = None
    for line in text.splitlines():
        if line.startswith("Uid:"):
            uids = [int(x) for x in line.split()[1:5] if x.isdigit()]
        elif line.startswith("CapEff:"):
            try:
                caps = int(line.split()[1], 16)
            except (IndexError, ValueError):
                caps = None
    if not uids or len(uids) != 4 or caps is None:
        return False
    return not any(u in (0, owner_uid) for u in uids) and not caps & _DAC_CAPS


def describe(holder):
    """`PID N (kind: command line)`, the one-line form operators see."""
    cmd = " ".join(holder.get("cmdline") or []) or "?"
    if len(cmd) > 120:
        cmd = cmd[:117] + "..."
    return "PID %s (%s: %s)" % (holder.get("pid"), holder.get("kind"), cmd)


def scan(db_path, proc="/proc", exclude_pids=None):
    """Every process holding db_path, -wal or -shm.

    Returns {"status": "known"|"unknown", "reason", "holders": [...], "retired": bool,
    "uninspectable": {"count", "users", "possible": [...]}}. Each holder has pid, ppid, user,
    uid, kind, cmdline, fds {role: count}, retired [{role, fd, target}]. "possible" lists
    processes whose fds could not be read but whose command line looks like Hermes or sqlite3.
    """
    exclude = set(exclude_pids or ())
    exclude.add(os.getpid())
    db_path = os.path.abspath(db_path)
    ids = file_ids(db_path)
    by_id = {(v["dev"], v["ino"]): role for role, v in ids.items()}
    names = {}
    for base in {db_path, os.path.realpath(db_path)}:
        for role, suffix in ROLES:
            names[base + suffix] = role
    out = {"status": "known", "reason": None, "holders": [], "retired": False,
           "uninspectable": {"count": 0, "users": [], "possible": []}, "unable": {"count": 0, "users": set()}}
    private = private_owner(db_path)
    try:
        pids = [int(p) for p in os.listdir(proc) if p.isdigit()]
    except OSError as exc:
        out["status"] = "unknown"
        out["reason"] = "cannot list %s: %s" % (proc, exc)
        return out
    if _hidepid(proc):
        out["status"] = "unknown"
        out["reason"] = "%s is mounted with hidepid: other users' processes are invisible" % proc
    users = set()
    user_names = {}
    for pid in sorted(pids):
        if pid in exclude:
            continue
        fd_dir = os.path.join(proc, str(pid), "fd")
        try:
            fds = os.listdir(fd_dir)
        except FileNotFoundError:
            continue  # exited meanwhile
        except OSError:
            seen = _peek(pid, proc, user_names)
            if seen is None:
                continue  # gone, a zombie or a kernel thread: no files open
            uid, cmdline = seen
            if private is not None and cannot_open(pid, private, proc):
                out["unable"]["count"] += 1
                out["unable"]["users"].add(user_names[uid])
                continue
            out["uninspectable"]["count"] += 1
            users.add(user_names[uid])
            kind = classify(cmdline)
            if kind != "unknown":
                info = process_info(pid, proc)
                if info is not None:
                    info["kind"] = kind
                    out["uninspectable"]["possible"].append(
                        {k: info[k] for k in ("pid", "ppid", "user", "uid", "kind", "cmdline")})
            continue
        counts = {}
        retired = []
        for fd in fds:
            link = os.path.join(fd_dir, fd)
            try:
                target = os.readlink(link)
            except OSError:
                continue
            if target.startswith(_SKIP_PREFIXES):
                continue
            role = None
            try:
                st = os.stat(link)
                role = by_id.get((st.st_dev, st.st_ino))
            except OSError:
                st = None
            if role is None and target.endswith(" (deleted)"):
                old_role = names.get(target[:-len(" (deleted)")])
                if old_role is not None:
                    retired.append({"role": old_role, "fd": int(fd), "target": target})
                    continue
            if role is not None:
                counts[role] = counts.get(role, 0) + 1
        if counts or retired:
            info = process_info(pid, proc) or {"pid": pid, "ppid": None, "uid": None, "user": "?", "cmdline": []}
            holder = {k: info.get(k) for k in ("pid", "ppid", "user", "uid", "cmdline")}
            holder["kind"] = classify(holder["cmdline"])
            if holder["kind"] not in ("unknown", "sqlite-shell", "desktop-serve"):
                holder["kind"] = classify(holder["cmdline"], environ(pid, proc))
            holder["fds"] = counts
            holder["retired"] = retired
            out["holders"].append(holder)
            if retired:
                out["retired"] = True
    out["uninspectable"]["users"] = sorted(users)
    out["unable"]["users"] = sorted(out["unable"]["users"])
    if out["unable"]["count"]:
        out["unable"]["why"] = ("not root, neither the owner (uid %d) of the 0600 store nor holding "
                                "CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH (/proc/PID/status)" % private)
    if out["uninspectable"]["count"] and out["status"] == "known":
        out["status"] = "unknown"
        out["reason"] = "%d process(es) of %s could not be inspected" % (
            out["uninspectable"]["count"], ", ".join(out["uninspectable"]["users"]))
    return out


def summary(result):
    """One line: "holders unknown (...)", "none", or "2: gateway 123, tui 456"."""
    holders = result.get("holders") or []
    parts = ["%s %s%s" % (h["kind"], h["pid"], " (retired WAL)" if h.get("retired") else "") for h in holders]
    text = ("%d: %s" % (len(holders), ", ".join(parts))) if holders else ""
    if result.get("status") != "known":
        poss = result.get("uninspectable", {}).get("possible") or []
        extra = "; maybe %s" % ", ".join("%s %s" % (p["kind"], p["pid"]) for p in poss) if poss else ""
        return (text + "; " if text else "") + "holders unknown" + extra
    return text or "none"


# ---------------------------------------------------------------- scan policy (repair steps)

POLICIES = ("strict", "owner")
_DB_NAMES = ("state.db", "state.db-wal", "state.db-shm")


def _could_hold(p, db_path, owner_uid):
    """An uninspectable process that looks like Hermes or sqlite3: could it hold this state.db?

    Only root and the file's owner can open a 0600 state.db; a sqlite3 shell counts only when
    an argument is this path, or a relative path named state.db (its cwd cannot be read)."""
    if p.get("uid") not in (0, owner_uid):
        return False
    if p.get("kind") != "sqlite-shell":
        # Hermes itself runs as `hermes ...`, `python .../hermes ...` or `python -m hermes_cli.main`:
        # a `hermes` further down a command line is an argument (a path), not the program
        head = split_argv(list(p.get("cmdline") or []))[:3]
        return any(hermes_entry(t) or os.path.basename(t) in ACP or
                   t.startswith(("hermes_cli", "tui_gateway", "acp_adapter")) for t in head)
    ours = set(os.path.realpath(db_path + s) for s in ("", "-wal", "-shm"))
    for a in (p.get("cmdline") or [])[1:]:
        if os.path.isabs(a):
            if os.path.realpath(a) in ours:
                return True
        elif os.path.basename(a) in _DB_NAMES:
            return True  # relative to a working directory we cannot read: assume it could be ours
    return False


def scan_policy(db_path, policy="strict", proc="/proc", exclude_pids=None):
    """scan(), then apply the repair steps' policy for processes whose fds could not be read.

    strict (fail closed): any uninspectable process leaves the answer "unknown".
    owner: for a payload running as the Hermes user (no root), where root's and other users'
    processes are never inspectable: they are assumed not to hold the file, unless one looks
    like Hermes or a sqlite3 shell on a state.db and runs as root or as the file's owner; a
    state.db readable by group or others (other users could open it) stays strict. The
    assumption is recorded in result["assumed"].
    """
    out = scan(db_path, proc, exclude_pids)
    if policy != "owner" or out["status"] == "known" or _hidepid(proc):
        return out
    if not out["uninspectable"]["count"]:
        return out  # unknown for another reason (cannot list /proc)
    try:
        st = os.stat(db_path)
    except OSError:  # mid-swap there may be no state.db: judge by its directory
        try:
            st = os.stat(os.path.dirname(os.path.abspath(db_path)))
        except OSError:
            return out
    if st.st_mode & 0o077:
        out["reason"] += "; %s is readable by group/others (mode %04o): policy owner does not apply" % (
            db_path, st.st_mode & 0o7777)
        return out
    risky = [p for p in out["uninspectable"]["possible"] if _could_hold(p, os.path.abspath(db_path), st.st_uid)]
    if risky:
        out["reason"] += "; of those, %s could hold it" % ", ".join(describe(p) for p in risky)
        return out
    out["assumed"] = {"policy": "owner", "reason": out["reason"],
                      "note": "processes that could not be inspected are assumed not to hold %s "
                              "(none of them looks like Hermes or a sqlite3 shell on it)" % db_path}
    out["status"] = "known"
    out["reason"] = None
    return out
