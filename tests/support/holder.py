#!/usr/bin/env python3
"""The Hermes Desktop app's stand-in and the backends it keeps alive, as the field sees them.

Field report 02 and HERMES-FACTS: while the Desktop app is connected it runs `hermes serve`
backends over SSH (a primary `--host 127.0.0.1 --port 0` and pool `--isolated` ones, each with
HERMES_DESKTOP=1), daemonised to PID 1, and starts a new one whenever one dies, for as long as
the app stays open: killing them never ends. The real `hermes serve --isolated` does not open
state.db while idle (only per desktop request), so the backend here is this file run as a
`hermes` console script (`<dir>/bin/hermes serve --isolated ...`, so /proc shows the same
command line as the real one) that keeps a real hermes_state.SessionDB open and appends a
message now and then, as a desktop session does; every message it committed is logged
(`committed <text>`), so a test can check that none was lost.

    app:     python3 holder.py app BIN DB LOG [--backends N] [--delay-min S] [--delay-max S] [--interval S]
                                          [--primary]
    backend: BIN serve --isolated --host 127.0.0.1 --port 0    (env FLEETOPS_DOUBLE_DB, FLEETOPS_DOUBLE_LOG)

The app runs until killed; the backends stay in its process group, so killing the group ends all.
"""
import os
import random
import signal
import sys
import time
import uuid


def log_line(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (text + "\n").encode())
    finally:
        os.close(fd)


def backend():
    """A desktop backend: SessionDB open for its whole life, a message every FLEETOPS_DOUBLE_INTERVAL s."""
    from pathlib import Path
    from hermes_state import SessionDB
    db_path, log = os.environ["FLEETOPS_DOUBLE_DB"], os.environ["FLEETOPS_DOUBLE_LOG"]
    interval = float(os.environ.get("FLEETOPS_DOUBLE_INTERVAL", "0.3"))
    me = os.getpid()
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    try:
        db = SessionDB(db_path=Path(db_path))
        sid = "desktop_%d_%s" % (me, uuid.uuid4().hex[:6])
        db.create_session(sid, "desktop", model="test-model")
    except Exception as exc:  # fenced or being repaired: a real backend dies, the app starts another
        log_line(log, "refused %d %s: %s" % (me, type(exc).__name__, exc))
        sys.exit(1)
    log_line(log, "opened %d %d" % (me, os.stat(db_path).st_ino))
    i = 0
    while True:
        text = "desktop %s message %d" % (sid, i)
        try:
            db.append_message(sid, "user", content=text)
        except Exception as exc:
            log_line(log, "error %d %s: %s" % (me, type(exc).__name__, exc))
            sys.exit(1)
        log_line(log, "committed %s" % text)
        i += 1
        time.sleep(interval)


def _spawn(bin_path, env, primary=False):
    """Start one backend daemonised (its parent exits, so it is reparented like the real one); its PID.
    The primary backend is `serve --host 127.0.0.1 --port 0`, the pool ones add `--isolated`."""
    argv = [bin_path, "serve"] + ([] if primary else ["--isolated"]) + ["--host", "127.0.0.1", "--port", "0"]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            child = os.fork()
            if child:
                os.write(w, str(child).encode())
                os._exit(0)
            os.close(w)
            os.execve(bin_path, argv, env)
        finally:
            os._exit(127)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return int(data)


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def app(argv):
    """Keep `--backends` backends alive forever, each restarted a random delay after it died."""
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("db")
    ap.add_argument("log")
    ap.add_argument("--backends", type=int, default=1)
    ap.add_argument("--delay-min", type=float, default=0.5)
    ap.add_argument("--delay-max", type=float, default=3.0)
    ap.add_argument("--interval", type=float, default=0.3)
    ap.add_argument("--primary", action="store_true", help="the first backend is the primary (no --isolated)")
    a = ap.parse_args(argv)
    env = dict(os.environ, HERMES_DESKTOP="1", FLEETOPS_DOUBLE_DB=a.db, FLEETOPS_DOUBLE_LOG=a.log,
               FLEETOPS_DOUBLE_INTERVAL=str(a.interval))
    slots = [{"pid": None, "due": 0.0} for _ in range(a.backends)]
    while True:
        now = time.monotonic()
        for s in slots:
            if s["pid"] is not None and not _alive(s["pid"]):
                log_line(a.log, "died %d" % s["pid"])
                s["pid"] = None
                s["due"] = now + random.uniform(a.delay_min, a.delay_max)
            if s["pid"] is None and now >= s["due"]:
                s["pid"] = _spawn(a.bin, env, primary=a.primary and s is slots[0])
                log_line(a.log, "spawned %d" % s["pid"])
        time.sleep(0.05)


if __name__ == "__main__":
    if sys.argv[1:2] == ["app"]:
        app(sys.argv[2:])
    else:
        backend()
