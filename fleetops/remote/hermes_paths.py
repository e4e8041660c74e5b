"""Find Hermes homes and profiles on a host, naming every profile explicitly.

`~/.hermes/active_profile` silently redirects Hermes' own commands to another
profile; a fleet tool that followed it would audit (or repair) the wrong file.
It is reported as a fact and never followed. Stdlib only, Python 3.8+.
"""
import os
import re

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
