"""Host-side `stat`: what is at a path, in ansible.builtin.stat's return shape.

`stat.exists` false for a missing path (not a failure); for an existing one the
fields playbooks test (isdir, isreg, islnk, mode as "0644", size, uid/gid and
their names, times, checksum of a regular file,
mimetype and charset as `file` gives them). Stdlib only, Python 3.8+.
"""
import os
import stat as st
import subprocess

from fleetops.remote.host.durable import hash_file

try:
    import grp
    import pwd
except ImportError:  # pragma: no cover
    grp = pwd = None  # type: ignore[assignment]

ALGORITHMS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512")


def _name(db, ident):
    try:
        return db(ident)[0]
    except (KeyError, TypeError):
        return None


def _mime(path):
    """(mimetype, charset) as `file` says, 'unknown' without it (as ansible.builtin.stat)."""
    try:
        proc = subprocess.run(["file", "-b", "--mime-type", "--mime-encoding", path], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, universal_newlines=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown", "unknown"
    kind, _, charset = proc.stdout.strip().partition("; charset=")
    if proc.returncode != 0 or not kind:
        return "unknown", "unknown"
    return kind, charset or "unknown"


def describe(path, follow=False, get_checksum=True, algorithm="sha1", get_mime=True):
    """The `stat` mapping of one path ({"exists": False} when there is nothing there)."""
    try:
        s = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return {"exists": False}
    mode = s.st_mode
    out = {
        "exists": True, "path": path, "mode": "%04o" % st.S_IMODE(mode),
        "isdir": st.S_ISDIR(mode), "isreg": st.S_ISREG(mode), "islnk": st.S_ISLNK(mode),
        "ischr": st.S_ISCHR(mode), "isblk": st.S_ISBLK(mode), "isfifo": st.S_ISFIFO(mode),
        "issock": st.S_ISSOCK(mode),
        "uid": s.st_uid, "gid": s.st_gid, "size": s.st_size, "inode": s.st_ino, "dev": s.st_dev,
        "nlink": s.st_nlink, "blocks": s.st_blocks, "block_size": s.st_blksize,
        "device_type": s.st_rdev, "atime": s.st_atime, "mtime": s.st_mtime, "ctime": s.st_ctime,
        "pw_name": _name(pwd.getpwuid, s.st_uid) if pwd else None,
        "gr_name": _name(grp.getgrgid, s.st_gid) if grp else None,
        "isuid": bool(mode & st.S_ISUID), "isgid": bool(mode & st.S_ISGID),
        "wusr": bool(mode & st.S_IWUSR), "rusr": bool(mode & st.S_IRUSR), "xusr": bool(mode & st.S_IXUSR),
        "wgrp": bool(mode & st.S_IWGRP), "rgrp": bool(mode & st.S_IRGRP), "xgrp": bool(mode & st.S_IXGRP),
        "woth": bool(mode & st.S_IWOTH), "roth": bool(mode & st.S_IROTH), "xoth": bool(mode & st.S_IXOTH),
        "readable": os.access(path, os.R_OK), "writeable": os.access(path, os.W_OK),
        "executable": os.access(path, os.X_OK),
    }
    if st.S_ISLNK(mode):
        out["lnk_source"] = os.path.realpath(path)
        out["lnk_target"] = os.readlink(path)
    if get_checksum and st.S_ISREG(mode) and out["readable"]:
        out["checksum"] = hash_file(path, algorithm)
    if get_mime:
        out["mimetype"], out["charset"] = _mime(path)
    return out


def main(args):
    path = os.path.expanduser(os.path.expandvars(str(args.get("path") or "")))
    algorithm = args.get("checksum_algorithm") or "sha1"
    if algorithm not in ALGORITHMS:
        return {"changed": False, "failed": True, "msg": "checksum_algorithm must be one of %s" % ", ".join(ALGORITHMS)}
    try:
        found = describe(path, bool(args.get("follow")), args.get("get_checksum") is not False, algorithm,
                         args.get("get_mime") is not False)
    except OSError as exc:            # as ansible.builtin.stat: only a missing path is exists=false
        return {"changed": False, "failed": True, "msg": exc.strerror or str(exc)}
    return {"changed": False, "failed": False, "msg": "", "stat": found}
