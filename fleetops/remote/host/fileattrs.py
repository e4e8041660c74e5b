"""A path's attributes as ansible-core's file arguments set them: mode (octal or symbolic,
`u+rwx,g-w,o=`), owner, group, access and modification times; and the path facts
(`state`, `mode`, `uid`, `owner`, `size`, ...) every file-module result carries.

Each setter compares first and changes only what differs, so `changed` is true only when
something on disk did (or, in check mode, would). Stdlib only, Python 3.8+.
"""
from __future__ import annotations

import os
import re
import stat
import time
from typing import Any, Dict, List, Optional, Tuple

try:  # not on every platform, and not needed when no owner/group is asked for
    import grp
    import pwd
except ImportError:  # pragma: no cover
    grp = pwd = None  # type: ignore[assignment]

PERM_BITS = 0o7777
_OPERATOR = re.compile(r"[+=-]")
_WHO = re.compile(r"^[ugo]+$")
_PERMS = re.compile(r"^[rwxXstugo]*$")
# per user class: its rwx bits, and the special bit `=` resets with them
_CLASS_BITS = {"u": (stat.S_IRWXU, stat.S_ISUID), "g": (stat.S_IRWXG, stat.S_ISGID), "o": (stat.S_IRWXO, stat.S_ISVTX)}
_SHIFT = {"u": 6, "g": 3, "o": 0}
NOW = "now"


class AttrError(Exception):
    """A wanted attribute that cannot be applied: the task fails with this message."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _perm_bits(who: str, perms: str, prev: int, is_dir: bool, use_umask: bool) -> int:
    """The bits `perms` (rwxXst or a copy of u/g/o) mean for one user class `who`."""
    shift = _SHIFT[who]
    allowed = (_umask() ^ PERM_BITS) if use_umask else PERM_BITS
    bits = 0
    for p in perms:
        if p in "rwx":
            bits |= ({"r": 4, "w": 2, "x": 1}[p] << shift) & allowed
        elif p == "X":
            if is_dir or prev & 0o111:
                bits |= 1 << shift
        elif p == "s":
            bits |= {"u": stat.S_ISUID, "g": stat.S_ISGID, "o": 0}[who]
        elif p == "t":
            bits |= stat.S_ISVTX if who == "o" else 0
        else:   # u, g or o: that class's current bits, moved to `who`'s place
            bits |= ((prev >> _SHIFT[p]) & 0o7) << shift
    return bits


def symbolic_mode(spec: str, current: int, is_dir: bool) -> int:
    """chmod's symbolic modes as ansible-core applies them: clauses split on ',', an empty
    who means all classes minus the umask's bits, `X` is x for directories or when some x is set."""
    mode = stat.S_IMODE(current)
    for clause in spec.split(","):
        parts = _OPERATOR.split(clause)
        ops = _OPERATOR.findall(clause)
        who = parts.pop(0)
        use_umask = who == ""
        if who in ("", "a"):
            who = "ugo"
        if not ops or not _WHO.match(who):
            raise AttrError("bad symbolic permission for mode: %s" % clause)
        for op, perms in zip(ops, parts):
            if not _PERMS.match(perms):
                raise AttrError("bad symbolic permission for mode: %s" % clause)
            for c in who:
                bits = _perm_bits(c, perms, mode, is_dir, use_umask)
                if op == "=":
                    rwx, special = _CLASS_BITS[c]
                    mode = (mode & ~(rwx | special) & PERM_BITS) | bits
                elif op == "+":
                    mode |= bits
                else:
                    mode &= ~bits & PERM_BITS
    return mode


def wanted_mode(spec: Any, current: int, is_dir: bool) -> Optional[int]:
    """The mode `spec` asks for an inode now `current`: an int (YAML 0644 is already 420),
    an octal string ('0644', '644', '0o644'), or a symbolic one; None when no mode is asked."""
    if spec is None or spec == "":
        return None
    if isinstance(spec, bool):
        raise AttrError("mode must be octal like '0644' or symbolic like 'u+rwx', not a boolean")
    if isinstance(spec, int):
        value = spec
    else:
        text = str(spec).strip()
        octal = text[2:] if text.startswith("0o") else text
        if octal and all(c in "01234567" for c in octal):
            value = int(octal, 8)
        else:
            return symbolic_mode(text, current, is_dir)
    if value < 0 or value > PERM_BITS:
        raise AttrError("mode %r is out of range" % (spec,))
    return value


def uid_of(owner: Any) -> Optional[int]:
    if owner is None or owner == "":
        return None
    if isinstance(owner, int) or str(owner).isdigit():
        return int(owner)
    if pwd is None:
        raise AttrError("owner names are not supported on this platform")
    try:
        return pwd.getpwnam(str(owner)).pw_uid
    except KeyError:
        raise AttrError("chown failed: failed to look up user %s" % owner) from None


def gid_of(group: Any) -> Optional[int]:
    if group is None or group == "":
        return None
    if isinstance(group, int) or str(group).isdigit():
        return int(group)
    if grp is None:
        raise AttrError("group names are not supported on this platform")
    try:
        return grp.getgrnam(str(group)).gr_gid
    except KeyError:
        raise AttrError("chgrp failed: failed to look up group %s" % group) from None


Change = Tuple[str, str, str]       # (attribute, before, after), for the diff


def set_attributes(path: str, args: Dict[str, Any], follow: bool, check: bool,
                   changes: List[Change]) -> bool:
    """Owner, group and mode of `path` as `args` ask, each only if it differs; a symlink is
    changed itself unless `follow` (Linux has no lchmod: a link's own mode is left alone)."""
    if follow and os.path.islink(path) and os.path.exists(path):
        path = os.path.realpath(path)
    st = os.lstat(path)
    is_link = stat.S_ISLNK(st.st_mode)
    uid, gid = uid_of(args.get("owner")), gid_of(args.get("group"))
    changed = False
    if (uid is not None and st.st_uid != uid) or (gid is not None and st.st_gid != gid):
        if uid is not None and st.st_uid != uid:
            changes.append(("owner", str(st.st_uid), str(uid)))
        if gid is not None and st.st_gid != gid:
            changes.append(("group", str(st.st_gid), str(gid)))
        if not check:
            try:
                os.lchown(path, -1 if uid is None else uid, -1 if gid is None else gid)
            except OSError as e:
                raise AttrError("chown failed: %s (%s)" % (e.strerror, path)) from None
        changed = True
    if is_link:
        return changed
    mode = wanted_mode(args.get("mode"), st.st_mode, stat.S_ISDIR(st.st_mode))
    if mode is not None and stat.S_IMODE(st.st_mode) != mode:
        changes.append(("mode", "%04o" % stat.S_IMODE(st.st_mode), "%04o" % mode))
        if not check:
            os.chmod(path, mode)
        changed = True
    return changed


def timestamp(value: Optional[str], fmt: str) -> Any:
    """An access/modification_time argument: None for 'preserve', NOW, or epoch seconds."""
    if value is None or value == "preserve":
        return None
    if value == NOW:
        return NOW
    try:
        return time.mktime(time.strptime(value, fmt))
    except (ValueError, OverflowError) as e:
        raise AttrError("Error while obtaining timestamp for time %s using format %s: %s" % (value, fmt, e)) from None


def set_times(path: str, mtime: Any, atime: Any, check: bool, changes: List[Change]) -> bool:
    """Times as ansible-core sets them: both 'now' touches (no ownership needed); otherwise only
    the times that differ are written."""
    if mtime is None and atime is None:
        return False
    st = os.stat(path)
    if mtime == NOW and atime == NOW:
        stamp = None
    else:
        now = time.time()
        m = st.st_mtime if mtime is None else (now if mtime == NOW else mtime)
        a = st.st_atime if atime is None else (now if atime == NOW else atime)
        if m == st.st_mtime and a == st.st_atime:
            return False
        stamp = (a, m)
        if m != st.st_mtime:
            changes.append(("mtime", str(st.st_mtime), str(m)))
        if a != st.st_atime:
            changes.append(("atime", str(st.st_atime), str(a)))
    if not check:
        try:
            os.utime(path, stamp)
        except OSError as e:
            raise AttrError("Error while updating modification or access time: %s (%s)" % (e.strerror, path)) from None
    return True


def path_state(path: str) -> str:
    """absent, link, directory, hard (a file with more than one link) or file, as ansible-core names them."""
    if not os.path.lexists(path):
        return "absent"
    if os.path.islink(path):
        return "link"
    if os.path.isdir(path):
        return "directory"
    try:
        return "hard" if os.stat(path).st_nlink > 1 else "file"
    except FileNotFoundError:
        return "absent"


def path_info(path: str) -> Dict[str, Any]:
    """The facts ansible-core adds to a result that names a path: state, mode, owner, size."""
    try:
        st = os.lstat(path)
    except OSError:
        return {"state": "absent"}
    info: Dict[str, Any] = {"uid": st.st_uid, "gid": st.st_gid, "mode": "%04o" % stat.S_IMODE(st.st_mode),
                            "size": st.st_size, "state": path_state(path)}
    if pwd is not None:
        try:
            info["owner"] = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            info["owner"] = str(st.st_uid)
        try:
            info["group"] = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            info["group"] = str(st.st_gid)
    return info
