"""Host-side wait: until a TCP port is open/closed or a path is present/absent.

It runs on the host so "port 8080 is open" means open from the host itself
(127.0.0.1), which is what a service restart needs; polling from the controller
would test the network instead. Stdlib only, Python 3.8+.
"""
import os
import socket
import time

PRESENT = ("started", "present")
ABSENT = ("stopped", "absent")


def _port_open(host, port, timeout):
    try:
        conn = socket.create_connection((host, int(port)), timeout=max(0.1, timeout))
    except (OSError, ValueError):
        return False
    conn.close()
    return True


def main(args):
    host = args.get("host") or "127.0.0.1"
    port = args.get("port")
    path = args.get("path")
    state = args.get("state") or "started"
    if state not in PRESENT + ABSENT:
        return {"changed": False, "failed": True, "skipped": False,
                "msg": "state must be one of %s" % ", ".join(PRESENT + ABSENT)}
    timeout = float(args.get("timeout", 300) if args.get("timeout") is not None else 300)
    delay = float(args.get("delay") or 0)
    sleep = float(args.get("sleep") or 1)
    connect_timeout = float(args.get("connect_timeout") or 5)
    want = state in PRESENT

    start = time.monotonic()
    if delay > 0:
        time.sleep(delay)
    if port is None and not path:
        elapsed = time.monotonic() - start
        return {"changed": False, "failed": False, "skipped": False,
                "msg": "waited %.1fs" % elapsed, "elapsed": round(elapsed, 3)}
    if port is not None:
        what = "port %s:%s to be %s" % (host, port, "open" if want else "closed")
    else:
        path = os.path.expanduser(os.path.expandvars(str(path)))
        what = "path %s to be %s" % (path, "present" if want else "absent")
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if port is not None:
            now = _port_open(host, port, min(connect_timeout, max(remaining, 0.1)))
        else:
            now = os.path.exists(path)
        if now == want:
            elapsed = time.monotonic() - start
            return {"changed": False, "failed": False, "skipped": False,
                    "msg": "%s after %.1fs" % (what.replace(" to be ", " is ", 1), elapsed),
                    "elapsed": round(elapsed, 3), "state": state, "port": port, "path": path}
        if time.monotonic() >= deadline:
            elapsed = time.monotonic() - start
            return {"changed": False, "failed": True, "skipped": False,
                    "msg": "timeout after %gs waiting for %s" % (timeout, what),
                    "elapsed": round(elapsed, 3), "state": state, "port": port, "path": path}
        time.sleep(max(0.0, min(sleep, deadline - time.monotonic())))
