"""The double fork, run for real: the grandchild has its own session, stdio on /dev/null, and
only the descriptors it was told to keep (a stray pipe open at the fork is closed)."""
from __future__ import annotations

import json
import os
import time

from fleetops.remote.host.daemon import detach


def test_the_detached_process_keeps_only_what_it_is_told():
    r, w = os.pipe()
    stray_r, stray_w = os.pipe()
    if detach(keep=(w,)):
        try:
            fds = {}
            for f in os.listdir("/proc/self/fd"):
                try:
                    fds[int(f)] = os.readlink(f"/proc/self/fd/{f}")
                except OSError:           # listdir's own descriptor, closed by now
                    pass
            os.write(w, json.dumps({"fds": {fd: t for fd, t in fds.items() if fd > 2}, "sid": os.getsid(0),
                                    "pid": os.getpid(),
                                    "stdin": os.readlink("/proc/self/fd/0")}).encode())
        finally:
            os._exit(0)
    os.close(w)
    os.close(stray_w)
    os.close(stray_r)
    data = b""
    end = time.monotonic() + 30
    while time.monotonic() < end:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    seen = json.loads(data)
    assert seen["sid"] != os.getsid(0)                        # a session of its own,
    assert seen["sid"] != seen["pid"]                         # led by the middle child: no terminal again
    assert seen["stdin"] == os.devnull
    assert list(seen["fds"]) == [str(w)] and seen["fds"][str(w)].startswith("pipe:")
