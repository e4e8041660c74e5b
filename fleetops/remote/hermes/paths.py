"""Find Hermes homes and profiles on a host, naming every profile explicitly.

`~/.hermes/active_profile` silently redirects Hermes' own commands to another
profile; a fleet tool that followed it would audit (or repair) the wrong file.
It is reported as a fact and never followed. Stdlib only, Python 3.8+.
"""
import os
import re
import stat

PROFILE_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
DB_NAME = "state.db"
DEFAULT_PROFILE = "default"


def default_root():
    """`~/.hermes` of the user the payload runs as (HERMES_HOME is per-shell, not per-host)."""
    return os.path.expanduser(os.path.join("~", ".hermes"))


def _as_list(value):
    """Accept a list or a comma/space separated string (inventory variables come both ways)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):  # a list rendered to text by templating
            import ast
            try:
                return [str(v) for v in ast.literal_eval(text) if str(v)]
            except (ValueError, SyntaxError):
                pass
        return [v for v in re.split(r"[,\s]+", text) if v]
    return [str(v) for v in value if str(v)]


def profile_home(root, name):
    """Where profile `name` lives: the root itself for `default`, else root/profiles/NAME."""
    if name == DEFAULT_PROFILE:
        return root
    return os.path.join(root, "profiles", name)


def _user(uid):
    try:
        import pwd
        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return str(uid)


def access_problem(db, write=False):
    """None, or one line saying why this user cannot read (write=True: nor write) state.db or a
    sidecar: "/h/.hermes/state.db not readable by alice: owned by root (uid 0), mode 0600".

    Why: SQLite reports such a file as "unable to open database file" deep inside a step, and
    a repair would find out only after stopping Hermes; the owner and mode say what to fix.
    os.access and a real open(2), since either alone can be wrong (ACLs, security modules).
    Call it before this process opens the file with SQLite: closing any descriptor of a file
    drops the process's POSIX locks on it.
    """
    me = _user(os.geteuid())
    for suffix in ("", "-wal", "-shm"):
        path = db + suffix
        try:
            st = os.stat(path)
        except OSError:
            continue
        ok = os.access(path, os.R_OK | (os.W_OK if write else 0))
        if ok and stat.S_ISREG(st.st_mode):
            try:
                os.close(os.open(path, (os.O_RDWR if write else os.O_RDONLY) | getattr(os, "O_NONBLOCK", 0)))
            except PermissionError:
                ok = False
            except OSError:
                pass  # not a permission problem (read-only filesystem, ...): the steps report it
        readable = ok or os.access(path, os.R_OK)
        if not ok and readable and os.statvfs(path).f_flag & os.ST_RDONLY:
            continue  # a read-only filesystem, not a permission: the steps report it
        if not ok:
            return "%s not %s by %s: owned by %s (uid %d), mode %04o" % (
                path, "writable" if readable else "readable", me, _user(st.st_uid), st.st_uid,
                stat.S_IMODE(st.st_mode))
    return None


def read_active_profile(root):
    """The content of active_profile (reported only, never used to pick a file)."""
    path = os.path.join(root, "active_profile")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(200).strip() or None
    except OSError:
        return None


def discover(hermes_home=None, hermes_profiles=None):
    """Every profile to audit: {"root", "active_profile", "profiles": [{profile, home, db, error}]}.

    With `hermes_profiles` only those names (``default`` is the root); otherwise the root
    plus each well-named directory under root/profiles. A named but absent profile is
    still listed (its db is then reported missing), so a typo never reads as healthy.
    """
    root = os.path.abspath(os.path.expanduser(hermes_home)) if hermes_home else default_root()
    wanted = _as_list(hermes_profiles)
    out = {"root": root, "active_profile": read_active_profile(root), "profiles": []}
    names = []
    if wanted:
        for name in wanted:
            if name not in names:
                names.append(name)
    else:
        names.append(DEFAULT_PROFILE)
        pdir = os.path.join(root, "profiles")
        try:
            entries = sorted(os.listdir(pdir))
        except OSError:
            entries = []
        for name in entries:
            if PROFILE_RE.match(name) and name != DEFAULT_PROFILE and os.path.isdir(os.path.join(pdir, name)):
                names.append(name)
    for name in names:
        if not PROFILE_RE.match(name):
            out["profiles"].append({"profile": name, "home": None, "db": None,
                                    "error": "invalid profile name (Hermes names are [a-z0-9][a-z0-9_-]{0,63})"})
            continue
        home = profile_home(root, name)
        out["profiles"].append({"profile": name, "home": home, "db": os.path.join(home, DB_NAME), "error": None})
    return out


def single(db_path):
    """The one-file form used by `fleetops inspect`: profile "-" with the file's directory as home."""
    db_path = os.path.abspath(os.path.expanduser(db_path))
    return {"root": os.path.dirname(db_path), "active_profile": None,
            "profiles": [{"profile": "-", "home": os.path.dirname(db_path), "db": db_path, "error": None}]}
