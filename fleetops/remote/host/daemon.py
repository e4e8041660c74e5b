"""Detaching a process from the payload that starts it (the double fork), written once: an async
job and the fence keeper must outlive the connection and hold none of its descriptors."""
from __future__ import annotations

import os


def detach(keep: tuple = ()) -> bool:
    """Fork twice: True in the grandchild (own session, stdio on /dev/null, every other
    descriptor closed but `keep`), False in the caller once the middle child has gone."""
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return False
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        # nothing of the payload's may stay open: not its result channel (the task would hang),
        # not the host lock's descriptor (the next payload would find it taken)
        low = 3
        for fd in sorted(keep):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 65536)
    except BaseException:  # noqa: BLE001 - a middle child must never return into the payload
        os._exit(127)
    return True
