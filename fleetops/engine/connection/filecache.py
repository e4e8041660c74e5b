"""Files parsed once per run and re-read only when they change (known_hosts, private keys).

A run opens one connection per host; a thousand hosts sharing one known_hosts or key file
should not parse it a thousand times, yet a key recorded mid-run must be seen.
"""
from __future__ import annotations

import os
import threading

_parsed_cache: dict = {}
_cache_lock = threading.Lock()


def _file_stamp(path: str):
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def cached(kind: str, path: str, build):
    """build(path), remembered while the file's inode, size and mtime stay the same: a run opens
    one connection per host, and re-reading one known_hosts / key file for each of a thousand
    hosts is pure waste. A changed file (a key recorded by --accept-new-host-keys) is re-read."""
    stamp = _file_stamp(path)
    with _cache_lock:
        hit = _parsed_cache.get((kind, path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    value = build(path)
    with _cache_lock:
        _parsed_cache[(kind, path)] = (stamp, value)
    return value
