"""Manage one entry of the connecting user's crontab, found by a marker comment.

Why a marker: the entry is ours exactly when the line before it reads
`# fleetops: NAME`, so a re-run edits that entry in place (idempotent), `absent`
removes only it, and every other line of the user's crontab is left byte for byte.
The crontab is read with `crontab -l` and written with `crontab -` (never the spool
file directly: cron notices the change and the spool's permissions stay cron's).
A crontab left with nothing in it is removed (`crontab -r`) so `absent` after a
fresh install leaves the user as before. `_check` computes the same answer and
writes nothing; `_diff` returns a unified diff. Generic, stdlib only, Python 3.8+.
"""
import difflib
import os
import re
import shutil
import subprocess

from fleetops.remote.host.contract import result

MARKER_PREFIX = "# fleetops: "
SPECIAL = ("reboot", "yearly", "annually", "monthly", "weekly", "daily", "hourly", "midnight")
FIELDS = ("minute", "hour", "day", "month", "weekday")
FIELD_RE = re.compile(r"^[0-9A-Za-z*/,\-]+$")
CRON_DAEMONS = ("cron", "crond", "cronie", "busybox-crond")


class Fail(Exception):
    """Bad input or a crontab we cannot read/write: becomes {failed: true, msg}."""


def main(args):
    try:
        return manage(args or {})
    except Fail as exc:
        return result(failed=True, msg=str(exc))


def entry_line(args):
    """The schedule + job line this entry should be, validated field by field."""
    job = args.get("job")
    if job is None or not str(job).strip():
        raise Fail("job is required when state is present")
    job = str(job)
    if "\n" in job or "\r" in job:
        raise Fail("job must be one line")
    special = args.get("special_time")
    given = [f for f in FIELDS if args.get(f) not in (None, "", "*")]
    if special:
        special = str(special).lstrip("@")
        if special not in SPECIAL:
            raise Fail("special_time %r is not one of %s" % (special, ", ".join(SPECIAL)))
        if given:
            raise Fail("special_time cannot be combined with %s" % ", ".join(given))
        return "@%s %s" % (special, job)
    parts = []
    for f in FIELDS:
        value = args.get(f)
        value = "*" if value in (None, "") else str(value).strip()
        if not FIELD_RE.match(value):
            raise Fail("%s %r is not a cron field (digits, names, * / , -)" % (f, value))
        parts.append(value)
    return "%s %s" % (" ".join(parts), job)


def read_crontab(crontab):
    """Current crontab text ('' when the user has none) and whether one exists."""
    proc = subprocess.run([crontab, "-l"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if proc.returncode == 0:
        return proc.stdout.decode("utf-8", "surrogateescape"), True
    err = proc.stderr.decode("utf-8", "replace").strip()
    if "no crontab" in err.lower():
        return "", False
    raise Fail("crontab -l failed (rc %d): %s" % (proc.returncode, err or "no message"))


def write_crontab(crontab, text):
    if text.strip():
        proc = subprocess.run([crontab, "-"], input=text.encode("utf-8", "surrogateescape"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        what = "crontab -"
    else:
        proc = subprocess.run([crontab, "-r"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        what = "crontab -r"
    if proc.returncode != 0:
        raise Fail("%s failed (rc %d): %s" % (what, proc.returncode,
                                              proc.stderr.decode("utf-8", "replace").strip() or "no message"))


def edit(text, name, line, present):
    """New crontab text: the marked entry set to `line` (present) or removed; duplicates dropped."""
    marker = MARKER_PREFIX + name
    lines = text.splitlines()
    out, placed, i = [], False, 0
    while i < len(lines):
        if lines[i].rstrip() == marker:
            has_job = i + 1 < len(lines) and not lines[i + 1].startswith(MARKER_PREFIX)
            i += 2 if has_job else 1
            if present and not placed:
                out += [marker, line]
                placed = True
            continue
        out.append(lines[i])
        i += 1
    if present and not placed:
        out += [marker, line]
    new = "\n".join(out)
    return new + "\n" if new else ""


def cron_daemon_running():
    """Whether a cron daemon process exists (None when /proc cannot be read)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        try:
            with open("/proc/%s/comm" % pid) as f:
                if f.read().strip() in CRON_DAEMONS:
                    return True
        except OSError:
            continue
    return False


def manage(args):
    name = str(args.get("name") or "").strip()
    if not name or "\n" in name:
        raise Fail("name (the marker) is required and must be one line")
    state = args.get("state") or "present"
    if state not in ("present", "absent"):
        raise Fail("state must be present or absent, got %r" % (state,))
    present = state == "present"
    line = entry_line(args) if present else None
    crontab = shutil.which("crontab")
    if crontab is None:
        if not present:
            return result(msg="no crontab command on this host: nothing to remove", entry=None)
        raise Fail("crontab command not found on this host (install the cron package)")
    before, existed = read_crontab(crontab)
    after = edit(before, name, line, present)
    if after.splitlines() == before.splitlines():
        after = before          # only a missing final newline differs: leave the file alone
    changed = after != before
    out = result(changed=changed, entry=line, marker=MARKER_PREFIX + name, state=state)
    if changed and not args.get("_check"):
        write_crontab(crontab, after)
    if args.get("_diff") and changed:
        out["diff"] = "".join(difflib.unified_diff(
            before.splitlines(True), after.splitlines(True),
            fromfile="crontab (before)" if existed else "/dev/null", tofile="crontab (after)"))
    verb = ("would " if args.get("_check") else "") + ("set" if present else "remove")
    out["msg"] = ("%s entry %r" % (verb, name)) if changed else "entry %r already %s" % (name, state)
    if present:
        running = cron_daemon_running()
        out["cron_daemon_running"] = running
        if running is False:
            out["warnings"] = ["no cron daemon is running on this host: the entry will not fire until one runs"]
    return out
