"""Read-only checks of one SQLite file run side by side, each worker on its own connection.

Why threads: SQLite releases the GIL while it steps a statement, so two checks that each walk
b-trees use two cores. Each worker holds one connection and one read transaction for every
unit it runs: figures that a unit compares with each other come from one snapshot. Why
figures per unit: an operator must know what each check costs on a big store (wall, the
thread's CPU, and the bytes the thread read, from /proc/thread-self/io).

Stdlib only, Python 3.8+.
"""
import os
import threading
import time


def thread_io():
    """(read_bytes, rchar) of the calling thread so far; (None, None) where /proc cannot say."""
    paths = ("/proc/thread-self/io", "/proc/self/task/%d/io" % threading.get_native_id())
    for path in paths:
        try:
            with open(path) as f:
                fields = dict(line.split(": ", 1) for line in f.read().splitlines() if ": " in line)
            return int(fields["read_bytes"]), int(fields["rchar"])
        except (OSError, KeyError, ValueError):
            continue
    return None, None


class Meter(object):
    """Wall, thread CPU and thread I/O from start() to stop(), as a dict of figures."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.c0 = time.thread_time()
        self.io0 = thread_io()

    def stop(self):
        io1 = thread_io()
        out = {"seconds": round(time.monotonic() - self.t0, 4),
               "cpu_seconds": round(time.thread_time() - self.c0, 4),
               "read_bytes": None, "rchar": None}
        if None not in self.io0 and None not in io1:
            out["read_bytes"] = io1[0] - self.io0[0]
            out["rchar"] = io1[1] - self.io0[1]
        return out


def add_figures(total, figures):
    """Sum one unit's figures into a check's (None stays None where a figure is missing)."""
    for key, value in figures.items():
        if key not in total:
            total[key] = value
        elif value is None or total[key] is None:
            total[key] = None
        else:
            total[key] = round(total[key] + value, 4)
    return total


class Unit(object):
    """One piece of a check: `fn(worker)` returns its result; it starts once every unit named
    in `deps` is done, unless `skip()` (asked just before) returns a reason."""

    def __init__(self, name, check, fn, deps=(), skip=None):
        self.name = name
        self.check = check
        self.fn = fn
        self.deps = tuple(deps)
        self.skip = skip
        self.result = None
        self.skipped = None
        self.figures = None
        self.worker = None


class Worker(object):
    """A connection, and a cache for what units build on it (TEMP tables, say)."""

    def __init__(self, index, conn):
        self.index = index
        self.conn = conn
        self.cache = {}


def jobs_for(requested):
    """Workers to use: what was asked, else one per core this process may run on."""
    if requested:
        return max(1, int(requested))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def commit_token(pins):
    """Bytes that change with every commit to the pinned store (sqlite/pins): the header's change
    counter (rollback journal) and the wal-index header in -shm (WAL). Equal before the first of
    several connections began reading and after the last did: they all read one snapshot. Read
    through the pinned descriptors: an open()/close() here would drop the connections' locks."""
    out = b""
    for suffix, length, offset in (("", 4, 24), ("-shm", 48, 0)):
        got = pins.pread(suffix, length, offset)
        out += (b"-" if got is None else got) + b"|"
    return out


def run_units(units, conns, prepare=None):
    """Run every unit and return {unit name: Unit}: one worker per connection of `conns`, the
    first in the calling thread (with one connection, every unit runs there, in list order).
    `prepare(worker)` runs on each worker before its first unit. The first exception a unit
    raises is raised here once every worker has stopped."""
    by_name = dict((u.name, u) for u in units)
    pending = list(units)
    done = set()
    cond = threading.Condition()
    failure = []

    def take():
        with cond:
            while pending and not failure:
                for i, u in enumerate(pending):
                    if all(d in done or d not in by_name for d in u.deps):
                        del pending[i]
                        reason = u.skip() if u.skip else None
                        if reason:
                            u.skipped = reason
                            done.add(u.name)
                            cond.notify_all()
                            break
                        return u
                else:
                    cond.wait()
            return None

    def work(worker):
        while True:
            u = take()
            if u is None:
                return
            meter = Meter()
            try:
                u.result = u.fn(worker)
            except BaseException as exc:  # noqa: B902 - re-raised in the caller's thread
                with cond:
                    failure.append(exc)
                    cond.notify_all()
                return
            finally:
                u.figures = meter.stop()
                u.worker = worker.index
            with cond:
                done.add(u.name)
                cond.notify_all()

    def start(worker):
        if prepare is not None:
            prepare(worker)
        work(worker)

    workers = [Worker(i, c) for i, c in enumerate(conns)]
    threads = [threading.Thread(target=start, args=(w,), name="sqlite-worker-%d" % w.index) for w in workers[1:]]
    for t in threads:
        t.daemon = True
        t.start()
    start(workers[0])
    for t in threads:
        t.join()
    if failure:
        raise failure[0]
    return by_name
