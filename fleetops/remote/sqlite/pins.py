"""A store's files read beside the process's own SQLite connections, through one descriptor each.

POSIX record locks belong to a process and an inode, not to a descriptor: closing any descriptor
of a file drops every lock the process holds on it. SQLite's connections hold their WAL read
marks (in -shm) and their SHARED lock (on the database) that way, so a plain open()/close() of
state.db or its -shm while a read transaction is open releases them: a writer then checkpoints
over the pages that transaction is reading, and a healthy store reads as damaged. Whatever the
audit reads of these files itself (the commit token, the page map, the WAL) goes through the
descriptors pinned here, opened before the first connection and closed after the last.

Stdlib only, Python 3.8+.
"""
import mmap
import os

SUFFIXES = ("", "-wal", "-shm")


class Pins(object):
    """Read-only descriptors of db, -wal and -shm (those that exist when pinned)."""

    def __init__(self, db):
        self.db = db
        self.fds = {}
        for s in SUFFIXES:
            try:
                self.fds[s] = os.open(db + s, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                pass
        self.first = self.identity()

    def pread(self, suffix, length, offset):
        """Bytes of a pinned file, or None when it was not there to pin."""
        fd = self.fds.get(suffix)
        return None if fd is None else os.pread(fd, length, offset)

    def read_all(self, suffix):
        fd = self.fds.get(suffix)
        return None if fd is None else os.pread(fd, os.fstat(fd).st_size, 0)

    def mapped(self, suffix):
        """A read-only map of a pinned file (closing the map leaves the descriptor open), or None."""
        fd = self.fds.get(suffix)
        if fd is None or not os.fstat(fd).st_size:
            return None
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)

    def identity(self):
        """What changes when anyone writes, replaces, creates or deletes one of the files: inode,
        size and mtime of each pinned one, and which of the three the path names now."""
        out = []
        for s in SUFFIXES:
            fd = self.fds.get(s)
            if fd is not None:
                st = os.fstat(fd)
                out.append((s, st.st_ino, st.st_size, st.st_mtime_ns))
            try:
                st = os.stat(self.db + s)
                out.append((s, "path", st.st_ino))
            except OSError:
                out.append((s, "path", None))
        return tuple(out)

    def changed(self):
        return self.identity() != self.first

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}
