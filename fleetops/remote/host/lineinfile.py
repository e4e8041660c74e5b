"""Host-side `lineinfile`: make one line present (added or replaced) or absent in a text file.

The decisions follow ansible.builtin.lineinfile line for line (regexp / search_string match
the last matching line unless firstmatch; insertafter/insertbefore only when nothing matched;
backrefs never adds a line), so a playbook reports the same `changed` and `msg` under both.
The file is rewritten atomically with its mode and owner kept; `backup` copies the original
aside first (`FILE.PID.DATE@TIME~`, the name Ansible gives it). Stdlib only, Python 3.8+.
"""
import os
import re
import shlex
import shutil
import subprocess
import time

from fleetops.remote.host.files import DEFAULT_FILE_MODE, Fail, atomic_write, content_diff, parse_mode

LINESEP = os.linesep.encode()


def _fail(msg, **extra):
    out = {"changed": False, "failed": True, "msg": msg}
    out.update(extra)
    return out


def _validator(validate):
    """`validate`'s check of the temp file (its %s), run without a shell as Ansible runs it."""
    def check(tmp):
        try:
            proc = subprocess.run(shlex.split(validate % tmp), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, universal_newlines=True)
        except OSError as exc:
            return "failed to validate: %s" % exc
        if proc.returncode != 0:
            return "failed to validate: rc:%d error:%s" % (proc.returncode, proc.stderr.strip())
        return None
    return check if validate else None


def _present(lines, regexp, search, line, insertafter, insertbefore, backrefs, firstmatch):
    """(lines after, msg, changed) as ansible-core's present() decides them."""
    lines = list(lines)
    bre_m = re.compile(regexp.encode()) if regexp is not None else None
    if insertafter not in (None, "BOF", "EOF"):
        bre_ins = re.compile(insertafter.encode())
    elif insertbefore not in (None, "BOF"):
        bre_ins = re.compile(insertbefore.encode())
    else:
        bre_ins = None
    index = [-1, -1]
    match = None
    exact = False
    b_line = line.encode()
    if bre_m is not None:
        for n, cur in enumerate(lines):
            found = bre_m.search(cur)
            if found:
                index[0], match = n, found
                if firstmatch:
                    break
    if search is not None:
        for n, cur in enumerate(lines):
            if search.encode() in cur:
                index[0], match = n, True
                if firstmatch:
                    break
    if not match:
        for n, cur in enumerate(lines):
            if b_line == cur.rstrip(b"\r\n"):
                index[0], exact = n, True
            elif bre_ins is not None and bre_ins.search(cur):
                if insertafter:
                    index[1] = n + 1
                    if firstmatch:
                        break
                if insertbefore:
                    index[1] = n
                    if firstmatch:
                        break
    msg, changed = "", False

    def add_at(i):
        lines.insert(i, b_line + LINESEP)
        return "line added", True
    if index[0] != -1:
        new = match.expand(b_line) if backrefs and match is not None and match is not True else b_line
        if not new.endswith(LINESEP):
            new += LINESEP
        if (regexp, search, match) == (None, None, None) and not exact:
            if insertafter and insertafter != "EOF":
                if lines and lines[-1][-1:] not in (b"\n", b"\r"):
                    lines[-1] += LINESEP
                if len(lines) == index[1]:
                    if lines[index[1] - 1].rstrip(b"\r\n") != b_line:
                        lines.append(b_line + LINESEP)
                        msg, changed = "line added", True
                elif lines[index[1]].rstrip(b"\r\n") != b_line:
                    msg, changed = add_at(index[1])
            elif insertbefore and insertbefore != "BOF":
                if index[1] <= 0:
                    if lines[index[1]].rstrip(b"\r\n") != b_line:
                        msg, changed = add_at(index[1])
                elif lines[index[1] - 1].rstrip(b"\r\n") != b_line:
                    msg, changed = add_at(index[1])
        elif lines[index[0]] != new:
            lines[index[0]] = new
            msg, changed = "line replaced", True
    elif backrefs:
        pass                       # nothing matched: the backrefs cannot be filled, add nothing
    elif insertbefore == "BOF" or insertafter == "BOF":
        msg, changed = add_at(0)
    elif insertafter == "EOF" or index[1] == -1:
        if lines and lines[-1][-1:] not in (b"\n", b"\r"):
            lines.append(LINESEP)
        lines.append(b_line + LINESEP)
        msg, changed = "line added", True
    elif insertafter and index[1] != -1:
        if len(lines) == index[1]:
            if lines[index[1] - 1].rstrip(b"\r\n") != b_line:
                lines.append(b_line + LINESEP)
                msg, changed = "line added", True
        elif b_line != lines[index[1]].rstrip(b"\n\r"):
            msg, changed = add_at(index[1])
    else:
        msg, changed = add_at(index[1])
    return lines, msg, changed


def _absent(lines, regexp, search, line):
    bre = re.compile(regexp.encode()) if regexp is not None else None
    b_line = line.encode() if line is not None else None

    def hit(cur):
        if bre is not None:
            return bool(bre.search(cur))
        if search is not None:
            return search.encode() in cur
        return b_line == cur.rstrip(b"\r\n")
    kept = [cur for cur in lines if not hit(cur)]
    return kept, len(lines) - len(kept)


def _check_args(args):
    state = args.get("state") or "present"
    regexp, search, line = args.get("regexp"), args.get("search_string"), args.get("line")
    if regexp is not None and search is not None:
        return "parameters are mutually exclusive: regexp|search_string"
    if args.get("insertafter") is not None and args.get("insertbefore") is not None:
        return "parameters are mutually exclusive: insertbefore|insertafter"
    if args.get("backrefs") and search is not None:
        return "parameters are mutually exclusive: backrefs|search_string"
    if state == "present":
        if line is None:
            return "line is required with state=present"
        if args.get("backrefs") and regexp is None:
            return "regexp is required with backrefs=true"
    elif regexp is None and search is None and line is None:
        return "one of line, search_string, or regexp is required with state=absent"
    if args.get("validate") and "%s" not in args["validate"]:
        return "validate must contain %%s: %s" % args["validate"]
    return None


def main(args):
    problem = _check_args(args)
    if problem:
        return _fail(problem)
    path = os.path.expanduser(os.path.expandvars(str(args["path"])))
    check, want_diff = bool(args.get("_check")), bool(args.get("_diff"))
    state = args.get("state") or "present"
    try:
        mode = parse_mode(args.get("mode"))
    except Fail as exc:
        return _fail(str(exc))
    if os.path.isdir(path):
        return _fail("Path %s is a directory !" % path, rc=256)
    exists = os.path.exists(path)
    if not exists:
        if state == "absent":
            return {"changed": False, "failed": False, "msg": "file not present"}
        if not args.get("create"):
            return _fail("Destination %s does not exist !" % path, rc=257)
        before = b""
    else:
        try:
            with open(path, "rb") as f:
                before = f.read()
        except OSError as exc:
            return _fail("cannot read %s: %s" % (path, exc.strerror))
    lines = before.splitlines(True)
    try:
        if state == "present":
            after, msg, changed = _present(lines, args.get("regexp"), args.get("search_string"),
                                           str(args["line"]), args.get("insertafter"),
                                           args.get("insertbefore"), bool(args.get("backrefs")),
                                           bool(args.get("firstmatch")))
            extra = {}
        else:
            after, found = _absent(lines, args.get("regexp"), args.get("search_string"),
                                   None if args.get("line") is None else str(args["line"]))
            changed = found > 0
            msg = "%d line(s) removed" % found if changed else ""
            extra = {"found": found}
    except re.error as exc:
        return _fail("bad regular expression: %s" % exc)
    content = b"".join(after)
    st = os.stat(path) if exists else None
    if st is not None and mode is not None and (st.st_mode & 0o7777) != mode:
        msg = (msg + " and " if msg else "") + "ownership, perms or SE linux context changed"
        changed = True
    backup = ""
    if changed and not check:
        try:
            if args.get("backup") and exists:
                backup = "%s.%d.%s~" % (path, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S"))
                shutil.copy2(path, backup)
            if not exists and os.path.dirname(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            keep = st.st_mode & 0o7777 if st is not None else DEFAULT_FILE_MODE
            uid = st.st_uid if st is not None and st.st_uid != os.geteuid() else None
            gid = st.st_gid if st is not None and st.st_gid != os.getegid() else None
            atomic_write(path, content, mode if mode is not None else keep, uid, gid, _validator(args.get("validate")))
        except Fail as exc:
            return _fail(str(exc), backup=backup)
        except OSError as exc:
            return _fail("cannot write %s: %s" % (path, exc.strerror or exc))
    out = {"changed": changed, "failed": False, "msg": msg, "backup": backup}
    out.update(extra)
    if want_diff and content != before:
        out["diff"] = content_diff(path, before if exists else None, content)
    return out
