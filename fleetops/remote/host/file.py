"""Payload of the file module: a path's state (file, directory, link, hard, touch, absent) and
attributes, decided as ansible-core's file module decides them.

What differs from it on purpose: a directory or file this creates is 0700/0600 unless `mode`
says otherwise (ansible-core: the umask), and every removal or replacement is fsynced.
"""
from __future__ import annotations

import os
import shutil
import time
from typing import Any, Dict, List, Optional

from fleetops.remote.host import fileattrs
from fleetops.remote.host.contract import result
from fleetops.remote.host.durable import fsync_dir
from fleetops.remote.host.fileattrs import AttrError, Change, path_state
from fleetops.remote.host.files import DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, state_diff

STATES = ("absent", "directory", "file", "hard", "link", "touch")


class _Fail(Exception):
    """The task fails with this message; `extra` joins the result (path, src, state)."""

    def __init__(self, msg: str, **extra: Any) -> None:
        super().__init__(msg)
        self.extra = extra


class _Task:
    """One file task's arguments, read once."""

    def __init__(self, args: Dict[str, Any]) -> None:
        self.args = args
        self.check = bool(args.get("_check"))
        self.follow = args.get("follow") is not False
        self.force = bool(args.get("force"))
        self.recurse = bool(args.get("recurse"))
        src = args.get("src")
        self.src: Optional[str] = None if src in (None, "") else os.path.expanduser(os.path.expandvars(str(src)))
        self.path = os.path.expanduser(os.path.expandvars(str(args.get("path") or "")))
        self.changes: List[Change] = []
        self.state = args.get("state") or None

    def times(self) -> tuple:
        default = "now" if self.state == "touch" else "preserve"
        mtime = fileattrs.timestamp(self.args.get("modification_time") or default,
                                    self.args.get("modification_time_format") or "%Y%m%d%H%M.%S")
        atime = fileattrs.timestamp(self.args.get("access_time") or default,
                                    self.args.get("access_time_format") or "%Y%m%d%H%M.%S")
        return mtime, atime

    def attributes(self, path: str) -> bool:
        """Owner, group, mode and times of `path`, each changed only where it differs."""
        changed = fileattrs.set_attributes(path, self.args, self.follow, self.check, self.changes)
        mtime, atime = self.times()
        if os.path.exists(path):
            changed |= fileattrs.set_times(path, mtime, atime, self.check, self.changes)
        return changed


def _resolve_state(t: _Task) -> None:
    """The defaults ansible-core gives: the current state, `directory` with recurse, else file;
    a path that is a directory names the file `src` would be inside it."""
    if t.state not in ("link", "absent", None) and os.path.isdir(t.path) and t.src:
        t.path = os.path.join(t.path, os.path.basename(t.src))
    prev = path_state(t.path)
    if t.state is None:
        t.state = prev if prev != "absent" else ("directory" if t.recurse else "file")
    if t.state not in STATES:
        raise _Fail("value of state must be one of: %s, got: %s" % (", ".join(STATES), t.state))
    if t.recurse and t.state != "directory":
        raise _Fail("recurse option requires state to be 'directory'", path=t.path)
    if t.src and t.state not in ("link", "hard"):
        raise _Fail("src option requires state to be 'link' or 'hard'", path=t.path)


def _absent(t: _Task, prev: str) -> bool:
    if prev == "absent":
        return False
    if not t.check:
        if prev == "directory":
            shutil.rmtree(t.path)
        else:
            try:
                os.unlink(t.path)
            except FileNotFoundError:
                pass
        fsync_dir(os.path.dirname(t.path) or ".")
    return True


def _touch(t: _Task, prev: str) -> bool:
    if prev == "absent":
        if t.check:
            return True
        mode = fileattrs.wanted_mode(t.args.get("mode"), DEFAULT_FILE_MODE, False)
        try:
            fd = os.open(t.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DEFAULT_FILE_MODE if mode is None else mode)
        except OSError as e:
            raise _Fail("Error, could not touch target: %s" % e, path=t.path) from None
        os.close(fd)
        try:
            t.attributes(t.path)
        except AttrError:
            os.unlink(t.path)         # just created here: nothing of the operator's is lost
            raise
        return True
    return t.attributes(t.path)


def _file(t: _Task, prev: str) -> bool:
    if prev == "link" and t.follow:
        t.path = os.path.realpath(t.path)
        prev = path_state(t.path)
    if prev not in ("file", "hard"):
        raise _Fail("file (%s) is %s, cannot continue" % (t.path, prev), path=t.path, state=prev)
    return t.attributes(t.path)


def _make_dirs(t: _Task) -> None:
    """mkdir -p: every directory it creates gets `mode` (0700 when none), owner and group."""
    missing = []
    p = t.path
    while p and not os.path.lexists(p):
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        mode = fileattrs.wanted_mode(t.args.get("mode"), DEFAULT_DIR_MODE | 0o40000, True)
        os.mkdir(d, DEFAULT_DIR_MODE if mode is None else mode)
        os.chmod(d, DEFAULT_DIR_MODE if mode is None else mode)
        t.attributes(d)


def _recurse(t: _Task, top: str) -> bool:
    changed = False
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            entry = os.path.join(root, name)
            changed |= t.attributes(entry)
            if os.path.islink(entry) and t.follow:
                target = os.path.join(root, os.readlink(entry))
                if os.path.isdir(target):
                    changed |= _recurse(t, target)
    return changed


def _directory(t: _Task, prev: str) -> bool:
    if prev == "link" and t.follow:
        t.path = os.path.realpath(t.path)
        prev = path_state(t.path)
    if prev == "absent":
        if not t.check:
            try:
                _make_dirs(t)
            except OSError as e:
                raise _Fail("There was an issue creating %s as requested: %s" % (t.path, e.strerror), path=t.path) from None
        return True
    if prev != "directory":
        raise _Fail("%s already exists as a %s" % (t.path, prev), path=t.path)
    changed = t.attributes(t.path)
    if t.recurse:
        changed |= _recurse(t, t.path)
    return changed


def _replace(t: _Task, prev: str, make) -> None:
    """Put the new link in place atomically: made beside the path, renamed over it."""
    if prev == "absent":
        make(t.path)
    else:
        tmp = os.path.join(os.path.dirname(t.path), ".%d.%s.tmp" % (os.getpid(), time.time()))
        try:
            if prev == "directory":
                os.rmdir(t.path)
            make(tmp)
            os.rename(tmp, t.path)
        except OSError as e:
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise _Fail("Error while replacing: %s" % e, path=t.path) from None
    fsync_dir(os.path.dirname(t.path) or ".")


def _link(t: _Task, prev: str) -> bool:
    src = t.src
    if src is None and t.follow and os.path.islink(t.path):
        src = os.readlink(t.path)
    base = t.path if (not os.path.islink(t.path) and os.path.isdir(t.path)) else os.path.dirname(t.path)
    if src is not None and not t.force and not os.path.exists(os.path.join(base, src)):
        raise _Fail("src file does not exist, use 'force=yes' if you really want to create the link: %s"
                    % os.path.join(base, src), path=t.path, src=src)
    if prev == "directory":
        if not t.force:
            raise _Fail("refusing to convert from directory to symlink for %s" % t.path, path=t.path)
        if os.listdir(t.path):
            raise _Fail("the directory %s is not empty, refusing to convert it" % t.path, path=t.path)
    elif prev in ("file", "hard") and not t.force:
        raise _Fail("refusing to convert from %s to symlink for %s" % (prev, t.path), path=t.path)
    changed = False
    if prev != "link":
        if src is None:
            raise _Fail("src is required for creating new symlinks")
        changed = True
    elif src is not None and os.readlink(t.path) != src:
        t.changes.append(("src", os.readlink(t.path), src))
        changed = True
    if changed and not t.check:
        new = str(src)
        _replace(t, prev, lambda p: os.symlink(new, p))
    t.src = src
    if t.check and not os.path.lexists(t.path):
        return changed
    if not (t.follow and os.path.islink(t.path) and not os.path.exists(t.path)):
        changed |= t.attributes(t.path)
    return changed


def _hard(t: _Task, prev: str) -> bool:
    src = t.src
    if prev != "hard" and src is None:
        raise _Fail("src is required for creating new hardlinks")
    if src is not None and not os.path.exists(src):
        raise _Fail("src does not exist", dest=t.path, src=src)
    changed = False
    if prev == "absent":
        changed = True
    elif prev == "link":
        changed = os.readlink(t.path) != src
    elif prev in ("hard", "file"):
        if src is not None and os.stat(t.path).st_ino != os.stat(src).st_ino:
            if not t.force:
                what = "different hard link" if prev == "hard" else prev
                raise _Fail("Cannot link, %s exists at destination" % what, dest=t.path, src=src)
            changed = True
    elif prev == "directory":
        if src is not None and os.stat(t.path).st_ino == os.stat(src).st_ino:
            return False
        if not t.force:
            raise _Fail("Cannot link: different hard link exists at destination", dest=t.path, src=src)
        changed = True
    if changed and not t.check:
        target = str(src)
        if t.follow and os.path.islink(target) and prev == "absent":
            target = os.readlink(target)
        _replace(t, prev, lambda p: os.link(target, p))
    if t.check and not os.path.lexists(t.path):
        return changed
    return t.attributes(t.path) or changed


_STEPS = {"absent": _absent, "touch": _touch, "file": _file, "directory": _directory, "link": _link, "hard": _hard}


def main(args: Dict[str, Any]) -> Dict[str, Any]:
    """{path, state?, src?, recurse?, follow?, force?, mode?, owner?, group?,
    modification_time[_format]?, access_time[_format]?, _check?, _diff?}."""
    t = _Task(args)
    if not t.path:
        return result(failed=True, msg="missing required arguments: path")
    try:
        _resolve_state(t)
        prev = path_state(t.path)
        changed = _STEPS[str(t.state)](t, prev)
    except _Fail as e:
        return result(failed=True, msg=str(e), **e.extra)
    except AttrError as e:
        return result(failed=True, msg=str(e), path=t.path)
    except OSError as e:
        where = " (%s)" % e.filename if getattr(e, "filename", None) else ""
        return result(failed=True, msg="%s%s" % (e.strerror or e, where), path=t.path)
    return _report(t, prev, changed)


def _report(t: _Task, prev: str, changed: bool) -> Dict[str, Any]:
    verb = ("would change" if t.check else "changed") if changed else "ok"
    out = result(changed=changed, msg="%s: %s is %s" % (verb, t.path, t.state))
    key = "dest" if t.state in ("link", "hard", "touch") else "path"
    out[key] = t.path
    if t.state in ("link", "hard"):
        out["src"] = t.src
    out.update(fileattrs.path_info(t.path))
    if t.state == "absent" or not os.path.lexists(t.path):
        out["state"] = "absent"
    if t.args.get("_diff"):
        before = [("path", t.path)] + ([("state", prev)] if prev != t.state else [])
        after = [("path", t.path)] + ([("state", t.state)] if prev != t.state else [])
        before += [(name, old) for name, old, _ in t.changes]
        after += [(name, new) for name, _, new in t.changes]
        out["diff"] = state_diff(t.path, before, after) if changed else ""
    return out
