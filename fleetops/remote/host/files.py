"""Host-side file work: the library of the copy, template and fetch payloads (and the file payload's defaults and diff).

One payload call per task: the controller sends the wanted state, this decides
what differs (content by sha256, mode, owner, group), changes it, and says so.
Writes are atomic (temp file in the same directory, fsync, rename, fsync of the
directory) so a crash or a full disk never leaves a half-written config behind.
`_check` computes the same answer and writes nothing. Stdlib only, Python 3.8+.
"""
import base64
import difflib
import hashlib
import os
import shutil
import stat
import tempfile
import time

from fleetops.remote.host.contract import result
from fleetops.remote.host.durable import fsync_dir
from fleetops.remote.host.fileattrs import AttrError, gid_of, uid_of

DEFAULT_FILE_MODE = 0o600
DEFAULT_DIR_MODE = 0o700
MAX_DIFF_BYTES = 512 * 1024
MAX_SLURP_BYTES = 64 * 1024 * 1024


class Fail(Exception):
    """A problem the operator can fix: becomes {failed: true, msg}."""


def run(args, step):
    """One file step (copy or slurp: step(args, check, want_diff)) as a payload
    result; the payloads copy, template, file and fetch call it."""
    try:
        return step(args, bool(args.get("_check")), bool(args.get("_diff")))
    except (Fail, AttrError) as e:
        return result(failed=True, msg=str(e))
    except OSError as e:
        where = " (%s)" % e.filename if getattr(e, "filename", None) else ""
        return result(failed=True, msg="%s%s" % (e.strerror or e, where))


def parse_mode(mode):
    """Octal string ('0644', '644') or int (YAML 0644 is already 420) -> int, None if unset."""
    if mode is None or mode == "":
        return None
    if isinstance(mode, bool):
        raise Fail("mode must be octal like '0644', not a boolean")
    if isinstance(mode, int):
        value = mode
    else:
        text = str(mode).strip()
        if text.startswith("0o"):
            text = text[2:]
        if not text or any(c not in "01234567" for c in text):
            raise Fail("mode %r is not an octal mode like '0644' (symbolic modes are not supported)" % (mode,))
        value = int(text, 8)
    if value < 0 or value > 0o7777:
        raise Fail("mode %r is out of range" % (mode,))
    return value


def _attr_changes(st, mode, uid, gid):
    """What differs between an existing inode and the wanted attributes, as readable lines."""
    changes = []
    if mode is not None and stat.S_IMODE(st.st_mode) != mode:
        changes.append(("mode", "%04o" % stat.S_IMODE(st.st_mode), "%04o" % mode))
    if uid is not None and st.st_uid != uid:
        changes.append(("owner", str(st.st_uid), str(uid)))
    if gid is not None and st.st_gid != gid:
        changes.append(("group", str(st.st_gid), str(gid)))
    return changes


def _apply_attrs(path, mode, uid, gid):
    if uid is not None or gid is not None:
        os.lchown(path, -1 if uid is None else uid, -1 if gid is None else gid)
    if mode is not None:
        os.chmod(path, mode)


def atomic_write(dest, content, mode, uid, gid, check=None):
    """Write to a temp file beside `dest`, set attributes, fsync, rename over, fsync the dir.
    `check(temp_path)` may refuse the new file before the rename: its message is raised as Fail."""
    directory = os.path.dirname(dest) or "."
    fd, tmp = tempfile.mkstemp(prefix=".fleetops-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            if uid is not None or gid is not None:
                os.fchown(f.fileno(), -1 if uid is None else uid, -1 if gid is None else gid)
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        refused = check(tmp) if check is not None else None
        if refused:
            raise Fail(refused)
        os.replace(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(directory)


def _as_text(data):
    if data is None:
        return ""
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def content_diff(path, before, after):
    """Unified diff of two byte strings, or a one-line note for binary or huge files."""
    if before == after:
        return ""
    if len(before or b"") > MAX_DIFF_BYTES or len(after or b"") > MAX_DIFF_BYTES:
        return "Files %s differ (too large to diff)\n" % path
    old, new = _as_text(before), _as_text(after)
    if old is None or new is None:
        return "Binary files %s (before) and %s (after) differ\n" % (path, path)
    lines = difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                 fromfile="%s (before)" % path if before is not None else "/dev/null",
                                 tofile="%s (after)" % path)
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def state_diff(path, before, after):
    """Unified diff of `key: value` lines, for state and attribute changes."""
    if before == after:
        return ""
    old = ["%s: %s\n" % kv for kv in before]
    new = ["%s: %s\n" % kv for kv in after]
    return "".join(difflib.unified_diff(old, new, fromfile="%s (before)" % path,
                                        tofile="%s (after)" % path, n=len(old) + len(new)))


def _attr_lines(changes, side):
    return [(name, pair[side]) for name, *pair in changes]


def copy(args, check, want_diff):
    dest = os.path.expanduser(os.path.expandvars(str(args.get("dest") or "")))
    if not dest:
        raise Fail("dest is required")
    try:
        content = base64.b64decode(args.get("content_b64") or "")
    except (ValueError, TypeError):
        raise Fail("content is not valid base64") from None
    mode = parse_mode(args.get("mode"))
    uid, gid = uid_of(args.get("owner")), gid_of(args.get("group"))

    make_dir = False
    if dest.endswith("/") or os.path.isdir(dest):
        name = args.get("basename")
        if not name:
            raise Fail("dest %s is a directory and there is no file name to put in it" % dest)
        make_dir = not os.path.isdir(dest)
        dest = os.path.join(dest, name)
    if os.path.islink(dest):
        dest = os.path.realpath(dest)     # edit the file a link points to, as `cp` does
    parent = os.path.dirname(dest) or "."
    if not make_dir and not os.path.isdir(parent):
        raise Fail("destination directory %s does not exist" % parent)

    st = None
    try:
        st = os.stat(dest)
    except FileNotFoundError:
        pass
    if st is not None and args.get("force") is False:
        # force: false, as ansible-core: an existing dest is left exactly as it is (content and attributes)
        return result(changed=False, msg="", dest=dest)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise Fail("%s exists and is not a regular file" % dest)
    old = None
    if st is not None:
        with open(dest, "rb") as f:
            old = f.read()
    new_sum = hashlib.sha256(content).hexdigest()
    content_changed = old is None or hashlib.sha256(old).hexdigest() != new_sum

    if st is None:
        final_mode = DEFAULT_FILE_MODE if mode is None else mode
        changes = []
    else:
        final_mode = stat.S_IMODE(st.st_mode) if mode is None else mode
        changes = _attr_changes(st, mode, uid, gid)
    changed = content_changed or bool(changes)

    backup_file = None
    if changed and not check:
        if make_dir:
            os.makedirs(os.path.dirname(dest), DEFAULT_DIR_MODE)
        if content_changed:
            if old is not None and args.get("backup"):
                backup_file = "%s.%d.%s~" % (dest, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S"))
                shutil.copy2(dest, backup_file)
            keep_uid = uid if uid is not None else (st.st_uid if st is not None and st.st_uid != os.geteuid() else None)
            keep_gid = gid if gid is not None else (st.st_gid if st is not None and st.st_gid != os.getegid() else None)
            try:
                atomic_write(dest, content, final_mode, keep_uid, keep_gid)
            except PermissionError:
                if uid is not None or gid is not None:
                    raise
                atomic_write(dest, content, final_mode, None, None)   # not root: keep our ownership
        else:
            _apply_attrs(dest, mode, uid, gid)

    if st is None:
        verb = "would create" if check else "created"
    elif changed:
        verb = "would update" if check else "updated"
    else:
        verb = "unchanged"
    out = result(changed=changed, msg="%s %s" % (verb, dest), dest=dest, checksum=new_sum,
                  size=len(content), mode="%04o" % final_mode)
    if backup_file:
        out["backup_file"] = backup_file
    if want_diff:
        text = content_diff(dest, old, content) if content_changed else ""
        text += state_diff(dest, _attr_lines(changes, 0), _attr_lines(changes, 1))
        out["diff"] = text
    return out


def slurp(args, check=False, want_diff=False):
    """The bytes of one host file (for `fetch` under become, where SFTP cannot sudo)."""
    path = os.path.expanduser(str(args.get("src") or ""))
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return result(failed=True, msg="file not found: %s" % path, missing=True)
    if os.path.isdir(path):
        raise Fail("%s is a directory" % path)
    if size > MAX_SLURP_BYTES:
        raise Fail("%s is too large to fetch this way (%d bytes)" % (path, size))
    with open(path, "rb") as f:
        data = f.read()
    return result(msg="read %s" % path, src=path, content_b64=base64.b64encode(data).decode("ascii"),
                   checksum=hashlib.sha256(data).hexdigest(), size=len(data))
