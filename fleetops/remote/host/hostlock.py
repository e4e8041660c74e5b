"""A host-side lock so two fleetops runs on one host refuse instead of interleaving.

Two layers, because each payload is its own short-lived process:
- flock(2) on the lock file, held for the duration of one payload: two payloads never run
  their steps at the same time, and a crashed payload releases it with its process;
- a lease written into the file (run id, expiry): between the payloads of one run (stop,
  quarantine, repair, swap, start), a second run with another id is refused until the
  first releases the lease or it expires. A payload without a run id only takes the flock.
Generic: the caller says where the lock file is. Stdlib only, Python 3.8+; `lease(args, path)`
is a payload step (action acquire / release / status), so a playbook can hold the lease across
all its steps.
"""
import errno
import fcntl
import json
import os
import socket
import sys
import time

DEFAULT_TTL = 3600.0


class Locked(Exception):
    """Raised by acquire(): the message names the holder and the remedy; `holder` is its record."""

    def __init__(self, msg, holder=None):
        Exception.__init__(self, msg)
        self.holder = holder or {}


def _mkdirs(path):
    if not os.path.isdir(path):
        _mkdirs(os.path.dirname(path))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass


def _read(fd):
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while True:
        b = os.read(fd, 65536)
        if not b:
            break
        data += b
    try:
        rec = json.loads(data.decode("utf-8")) if data.strip() else {}
        return rec if isinstance(rec, dict) else {}
    except ValueError:
        return {}


def _write(fd, rec):
    data = (json.dumps(rec, sort_keys=True) + "\n").encode("utf-8") if rec else b""
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    while data:
        data = data[os.write(fd, data):]
    os.fsync(fd)


def _describe(rec, path):
    if not rec:
        return "another process holds the host lock %s" % path
    parts = []
    if rec.get("run_id"):
        parts.append("run %s" % rec["run_id"])
    if rec.get("purpose"):
        parts.append(rec["purpose"])
    if rec.get("pid"):
        parts.append("pid %s" % rec["pid"])
    if rec.get("acquired_at"):
        parts.append("since %s" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rec["acquired_at"])))
    if rec.get("expires_at"):
        parts.append("lease until %s" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rec["expires_at"])))
    return "another fleetops run holds the host lock %s (%s)" % (path, ", ".join(parts))


class Lock(object):
    """One held flock (+ maybe a lease). release() drops the flock; a run lease stays until released."""

    def __init__(self, path, fd, rec):
        self.path = path
        self.fd = fd
        self.record = rec

    def release(self):
        if self.fd is None:
            return
        try:
            if not self.record.get("run_id"):
                _write(self.fd, {})  # a process-only lock leaves nothing behind
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            os.close(self.fd)
            self.fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _flock(path, wait):
    _mkdirs(os.path.dirname(path))
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + max(0.0, float(wait or 0))
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                os.close(fd)
                raise
            if time.monotonic() >= deadline:
                rec = _read(fd)
                os.close(fd)
                raise Locked("%s; wait for it to finish and re-run" % _describe(rec, path), rec) from None
            time.sleep(0.1)


def acquire(path, run_id=None, ttl=DEFAULT_TTL, purpose="", wait=0.0, now=None):
    """Take the flock and (with run_id) the lease; raise Locked naming the holder otherwise."""
    fd = _flock(path, wait)
    now = time.time() if now is None else now
    try:
        rec = _read(fd)
        other = rec.get("run_id")
        if other and other != run_id and float(rec.get("expires_at") or 0) > now:
            raise Locked("%s; wait for that run to finish, or if it died release its lease "
                         "(hostlock action=release run_id=%s) or wait until it expires"
                         % (_describe(rec, path), other), rec)
        new = {"pid": os.getpid(), "purpose": purpose, "host": socket.gethostname(),
               "acquired_at": rec.get("acquired_at") if other and other == run_id else now,
               "argv0": sys.argv[0] if sys.argv else ""}
        if run_id:
            new["run_id"] = run_id
            new["expires_at"] = now + float(ttl)
        if other and other != run_id:
            new["took_over_expired"] = other
        _write(fd, new)
    except BaseException:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        raise
    return Lock(path, fd, new)


def release_lease(path, run_id, wait=5.0):
    """Drop run_id's lease; returns True if it was ours, False if absent or someone else's."""
    if not os.path.exists(path):
        return False
    fd = _flock(path, wait)
    try:
        rec = _read(fd)
        if rec.get("run_id") == run_id:
            _write(fd, {})
            return True
        return False
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def status(path):
    """{"held": bool (flock busy), "lease": record or None} without waiting."""
    if not os.path.exists(path):
        return {"held": False, "lease": None}
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = False
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            held = True
        rec = _read(fd)
    finally:
        os.close(fd)
    if rec.get("expires_at") and float(rec["expires_at"]) <= time.time():
        rec["expired"] = True
    return {"held": held, "lease": rec or None}


def lease(args, path):
    """The lease in lock file `path` as a payload step: args {action: acquire|release|status,
    run_id, ttl?, wait?, purpose?, _check?}."""
    args = args or {}
    action = args.get("action") or "status"
    run_id = args.get("run_id")
    if action == "status" or args.get("_check"):
        st = status(path)
        return {"changed": False, "failed": False, "skipped": False, "path": path, "status": st,
                "msg": ("check mode: would %s the lease; " % action if args.get("_check") and action != "status"
                        else "") + ("lease held by run %s" % st["lease"].get("run_id")
                                    if st["lease"] and st["lease"].get("run_id") else "no lease")}
    if not run_id:
        return {"changed": False, "failed": True, "skipped": False, "msg": "hostlock %s needs run_id" % action}
    if action == "acquire":
        try:
            lk = acquire(path, run_id=run_id, ttl=float(args.get("ttl") or DEFAULT_TTL),
                         purpose=args.get("purpose") or "fleetops run", wait=float(args.get("wait") or 0))
        except Locked as exc:
            return {"changed": False, "failed": True, "skipped": False, "refused": True,
                    "msg": str(exc), "lock_holder": exc.holder, "path": path}
        rec = dict(lk.record)
        lk.release()
        return {"changed": True, "failed": False, "skipped": False, "path": path, "lease": rec,
                "msg": "lease for run %s until %s" % (run_id, time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime(rec["expires_at"])))}
    if action == "release":
        ok = release_lease(path, run_id)
        return {"changed": ok, "failed": False, "skipped": False, "path": path,
                "msg": "lease of run %s released" % run_id if ok else "run %s held no lease" % run_id}
    return {"changed": False, "failed": True, "skipped": False, "msg": "unknown action %r" % action}
