"""Host-side files on disk: fsync (a rename is durable only once its directory is synced) and
sha256 (how every copy, move and swap proves it kept the bytes).

Stdlib only, Python 3.8+. (hermes_backup.py keeps its own copies: it is installed on hosts
as a standalone script for the backup units and imports nothing from fleetops.)
"""
import hashlib
import os


def fsync_dir(path):
    """fsync a directory after a rename or create in it; best effort: some filesystems refuse
    fsync on a directory, and the rename has happened either way."""
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def fsync_file(path):
    """fsync a file's data by path; errors propagate (the caller must not go on as if it were on disk)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_file(path, bufsize=1 << 20):
    """sha256 hex of a file's bytes, read in chunks."""
    return hash_file(path, "sha256", bufsize)


def hash_file(path, algorithm, bufsize=1 << 20):
    """Hex digest of a file's bytes with any hashlib algorithm, read in chunks."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        while True:
            b = fh.read(bufsize)
            if not b:
                break
            h.update(b)
    return h.hexdigest()
