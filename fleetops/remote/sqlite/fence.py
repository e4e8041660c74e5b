"""A fence around one SQLite file: its lock bytes write-locked by a keeper process, so no other
process can read or write the database through SQLite until the keeper goes.

Why SQLite's own locks: every SQLite connection, in rollback (DELETE) and in WAL mode, takes a
POSIX read lock on the file's PENDING byte and SHARED range before it reads a page, and a WAL
connection keeps its SHARED lock for as long as it is open. A write lock on those 512 bytes
(PENDING, RESERVED, the SHARED range at 0x40000000) therefore (a) is only granted once no
connection is open in WAL mode and none is inside a transaction in DELETE mode, so everything
committed is in the image, and (b) makes every later read or write fail with "database is
locked" (a respawned process blocks, then fails to open). The bytes of the file are never
touched: the fence needs no SQLite, no schema and no readable file.

Why a keeper process, and why its life is the connection's: the fence has to outlive one
payload (stop, quarantine, repair, swap are separate payloads), and a POSIX lock is owned by a
process and dropped by the kernel when that process exits, or when it closes any descriptor of
the file, which a payload reading the file would do. So the lock lives in a small keeper of its
own (`python3 -I -S -c <KEEPER> fleetops-sqlite-fence {json}`, easy to spot in ps), which
exits, and so releases the fence, when (1) released, (2) its anchor is gone: the SSH
connection's own sshd process, which ends when the controller is killed or the connection
drops, (3) its time to live runs out. It waits for the lock with F_SETLKW: the kernel grants it
the moment the last SQLite lock is gone, before any new process can start and open the file.

Generic: knows SQLite's file locking, nothing of Hermes. Stdlib only, Python 3.8+, Linux /proc.
"""
import fcntl
import json
import os
import select
import signal
import struct
import sys
import time

from fleetops.remote.host.daemon import detach

PENDING_BYTE = 0x40000000   # SQLite's lock page: PENDING, RESERVED, then 510 SHARED bytes
LOCK_SPAN = 512
TAG = "fleetops-sqlite-fence"
ANCHOR_COMMS = ("sshd", "sshd-session")

# The keeper: takes the lock (blocking, bounded by alarm), says so on the ready pipe, then
# sleeps until released (SIGTERM), its anchor dies or its time to live passes.
KEEPER = r'''
import fcntl, json, os, signal, sys, time
cfg = json.loads(sys.argv[2])
out = int(sys.argv[3])
def say(s):
    os.write(out, (s + "\n").encode())
def started(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            s = f.read().decode("ascii", "replace")
        return int(s[s.rfind(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None
me = os.getpid()
say("pid %d %s" % (me, started(me)))
signal.alarm(max(1, int(cfg["wait"] + 0.999)))
fd = os.open(cfg["path"], os.O_RDWR)
st = os.fstat(fd)
if cfg.get("expect") and [st.st_dev, st.st_ino] != cfg["expect"]:
    say("moved %d %d" % (st.st_dev, st.st_ino))
    sys.exit(3)
fcntl.lockf(fd, fcntl.LOCK_EX, cfg["span"], cfg["start"], 0)
signal.alarm(0)
a = cfg.get("anchor")
def anchored():
    return not a or started(a["pid"]) == a["start_time"]
if not anchored():
    sys.exit(4)
say("locked %d %d" % (st.st_dev, st.st_ino))
os.close(out)
end = time.monotonic() + cfg["ttl"]
while time.monotonic() < end and anchored():
    time.sleep(0.2)
'''


class FenceError(Exception):
    """The fence could not be taken (or was lost); the message says why."""


def _stat(pid):
    try:
        with open("/proc/%d/stat" % int(pid), "rb") as f:
            s = f.read().decode("ascii", "replace")
        return s[s.rfind(")") + 2:].split()
    except (OSError, ValueError, TypeError):
        return None


def start_time(pid):
    """Clock-tick start time of a live pid (field 22 of /proc/PID/stat); None if gone or a zombie."""
    f = _stat(pid)
    if not f or len(f) < 20 or f[0] == "Z":
        return None
    return int(f[19])


def _comm(pid):
    try:
        with open("/proc/%d/comm" % pid, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def _ppid(pid):
    f = _stat(pid)
    return int(f[1]) if f and len(f) > 1 else None


def connection_anchor(pid=None):
    """The process whose end means "the controller is gone": the nearest sshd ancestor (the
    per-connection sshd process, alive exactly as long as the SSH connection; also under sudo),
    else this process's parent (a payload run locally: the controller itself)."""
    me = os.getpid() if pid is None else pid
    p = _ppid(me)
    seen = 0
    while p and p > 1 and seen < 64:
        if _comm(p) in ANCHOR_COMMS:
            return {"pid": p, "start_time": start_time(p), "what": "sshd connection process"}
        p = _ppid(p)
        seen += 1
    parent = _ppid(me)
    if not parent or parent <= 1 or start_time(parent) is None:
        return None  # no anchor to watch: the keeper's time to live bounds it
    return {"pid": parent, "start_time": start_time(parent), "what": "parent process"}


def alive(keeper):
    """The keeper process is still the one that was started (pid and start time)."""
    return bool(keeper) and keeper.get("pid") and start_time(keeper["pid"]) == keeper.get("start_time")


def lock_owner(path):
    """PID of the process holding a lock that conflicts with a write lock on path's lock bytes:
    0 when none does, None when it cannot be told (no file, no F_GETLK)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        req = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, PENDING_BYTE, LOCK_SPAN, 0)
        res = fcntl.fcntl(fd, fcntl.F_GETLK, req)
        l_type = struct.unpack("hhqqi", res)[0]
        if l_type == fcntl.F_UNLCK:
            return 0
        return struct.unpack("hhqqi", res)[4]
    except (OSError, struct.error):
        return None
    finally:
        os.close(fd)


class Keeper(object):
    """A keeper being started: poll() until it holds the lock (or failed); cancel() ends it."""

    def __init__(self, path, anchor, ttl, wait, expect=None):
        self.path = path
        self.info = None
        self.pid = None
        self.error = None
        self._buf = b""
        self.start = None
        cfg = {"path": path, "start": PENDING_BYTE, "span": LOCK_SPAN, "ttl": float(ttl),
               "wait": float(wait), "anchor": anchor, "expect": list(expect) if expect else None}
        r, w = os.pipe()
        if detach(keep=(w,)):  # pragma: no cover - the detached grandchild becomes the keeper
            try:
                os.set_inheritable(w, True)
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                os.execv(sys.executable, [sys.executable, "-I", "-S", "-c", KEEPER, TAG,
                                          json.dumps(cfg, sort_keys=True), str(w)])
            except BaseException:
                pass
            os._exit(127)
        os.close(w)
        self._r = r
        self.deadline = time.monotonic() + float(wait) + 5.0
        # its PID before it opens the file, so a holder scan can leave it out from the start
        end = time.monotonic() + 30.0
        while self.pid is None and self._r is not None and self.error is None and time.monotonic() < end:
            self._take(self._lines(0.5))
        if self.pid is None:
            self.cancel()
            raise FenceError(self.error or "the fence keeper did not start")

    def _lines(self, timeout):
        out = []
        if self._r is None:
            return out
        ready, _, _ = select.select([self._r], [], [], max(0.0, timeout))
        if ready:
            data = os.read(self._r, 4096)
            if not data:
                os.close(self._r)
                self._r = None
                if self.info is None and self.error is None:
                    self.error = "the keeper ended before it held the lock"
            self._buf += data
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            out.append(line.decode("ascii", "replace").split())
        return out

    def poll(self, timeout=0.0):
        """The fence record once the lock is held; None while the keeper waits; raises FenceError."""
        self._take(self._lines(timeout))
        if self.info:
            return self.info
        if self.error:
            raise FenceError(self.error)
        if time.monotonic() > self.deadline:
            self.cancel()
            raise FenceError("the keeper did not get the lock of %s in time" % self.path)
        return None

    def _take(self, lines):
        for words in lines:
            if words[:1] == ["pid"]:
                self.pid = int(words[1])
                # read here, as every later check reads it: a process's view of its own
                # /proc/self/stat can differ (qemu-user synthesises it for an emulated keeper)
                self.start = start_time(self.pid)
                if self.start is None and words[2:3] and words[2].isdigit():
                    self.start = int(words[2])
            elif words[:1] == ["locked"]:
                self.info = {"pid": self.pid, "start_time": self.start, "path": self.path,
                             "dev": int(words[1]), "ino": int(words[2]), "since": time.time()}
            elif words[:1] == ["moved"]:
                self.error = "%s is no longer the file it was (inode %s)" % (self.path, words[2])

    def wait(self, timeout):
        end = time.monotonic() + timeout
        while True:
            got = self.poll(min(0.2, max(0.0, end - time.monotonic())))
            if got:
                return got
            if time.monotonic() >= end:
                self.cancel()
                raise FenceError("%s stayed locked by another process for %.0f s (PID %s holds a "
                                 "SQLite lock on it)" % (self.path, timeout, lock_owner(self.path)))

    def cancel(self):
        if self.pid and self.start and start_time(self.pid) == self.start:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._r is not None:
            os.close(self._r)
            self._r = None


def release(keepers, timeout=10.0):
    """End each keeper (SIGTERM) and wait until it is gone, so its locks are gone; PIDs released."""
    done = []
    for k in keepers or []:
        if alive(k):
            try:
                os.kill(k["pid"], signal.SIGTERM)
            except ProcessLookupError:
                pass
            done.append(k["pid"])
    end = time.monotonic() + timeout
    while any(alive(k) for k in keepers or []):
        if time.monotonic() > end:
            for k in keepers:
                if alive(k):
                    os.kill(k["pid"], signal.SIGKILL)
            end = time.monotonic() + timeout
        time.sleep(0.05)
    return done
