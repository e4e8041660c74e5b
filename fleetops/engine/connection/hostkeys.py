"""known_hosts, read and written as OpenSSH does: hashed names, @revoked, `[addr]:port`.

A fleet tool that silently trusts a new or changed host key hands the fleet's credentials to
whoever answers first; this is the one place that decides whether a host key is the host's.
"""
from __future__ import annotations

import base64
import fcntl
import hashlib
import hmac
import logging
import os

from fleetops.engine.connection.filecache import cached
from fleetops.errors import Unreachable

log = logging.getLogger("fleetops.ssh")


def known_hosts_name(address: str, port: int) -> str:
    """The name OpenSSH files a host under: `addr` on port 22, else `[addr]:port`."""
    return address if int(port) == 22 else f"[{address}]:{port}"


def fingerprint(key_blob: bytes) -> str:
    """OpenSSH-style SHA256 fingerprint of a public key blob."""
    digest = hashlib.sha256(key_blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _hashed_name_matches(field: str, name: str) -> bool:
    """Whether a hashed host field (`|1|salt|hash`) is `name`'s."""
    try:
        _, _, salt, want = field.split("|", 3)
        mac = hmac.new(base64.b64decode(salt), name.encode(), hashlib.sha1).digest()
        return hmac.compare_digest(mac, base64.b64decode(want))
    except (ValueError, TypeError):
        return False


def _parse_known_hosts(path: str) -> dict:
    """Every usable line, indexed: plain names -> [(key type, blob)] (a fleet's known_hosts has a
    line per host, and scanning it for each of a thousand hosts made set-up quadratic), hashed
    lines [(host field, key type, blob)] (each must be tried), and @revoked blobs."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    index: dict = {"names": {}, "hashed": [], "revoked": []}
    for line in lines:
        fields = line.strip().split()
        if not fields or fields[0].startswith("#"):
            continue
        marker = None
        if fields[0].startswith("@"):
            marker, fields = fields[0], fields[1:]
        if len(fields) < 3:
            continue
        try:
            blob = base64.b64decode(fields[2], validate=True)
        except (ValueError, TypeError):
            continue
        if marker == "@revoked":
            index["revoked"].append(blob)
        elif marker is not None:
            continue
        elif fields[0].startswith("|1|"):
            index["hashed"].append((fields[0], fields[1], blob))
        else:
            for name in fields[0].split(","):
                index["names"].setdefault(name, []).append((fields[1], blob))
    return index


def read_known_hosts(path: str, name: str) -> tuple[list[tuple[str, bytes]], list[bytes]]:
    """(known (keytype, blob) entries, revoked blobs) for `name`; hashed entries included."""
    try:
        index = cached("known_hosts", path, _parse_known_hosts)
    except FileNotFoundError:
        return [], []
    except OSError as e:
        raise Unreachable(f"cannot read known_hosts {path}: {e.strerror or e}") from e
    known = list(index["names"].get(name, ()))
    known += [(ktype, blob) for field, ktype, blob in index["hashed"] if _hashed_name_matches(field, name)]
    return known, list(index["revoked"])


def verify_host_key(key, name: str, known, revoked, path: str, accept_new: bool) -> None:
    """Accept `key` for `name` only as OpenSSH's StrictHostKeyChecking yes (or accept-new) would:
    a revoked or changed key is refused, an unknown one recorded only when `accept_new`."""
    blob, ktype = key.asbytes(), key.get_name()
    fp = fingerprint(blob)
    if blob in revoked:
        raise Unreachable(f"host key for {name} ({ktype} {fp}) is marked @revoked in known_hosts; "
                          f"refusing to connect")
    if any(kt == ktype and b == blob for kt, b in known):
        return
    if known:
        same = [b for kt, b in known if kt == ktype] or [known[0][1]]
        raise Unreachable(f"HOST KEY CHANGED for {name}: known_hosts has {fingerprint(same[0])}, "
                          f"host offers {fp}; refusing to connect")
    if not accept_new:
        raise Unreachable(f"host key for {name} is not in known_hosts ({ktype} {fp}); add it, "
                          f"or run with --accept-new-host-keys")
    record_new_key(path, name, ktype, blob, fp)


def record_new_key(path: str, name: str, ktype: str, blob: bytes, fp: str) -> None:
    """Append under an exclusive lock, re-checking: another worker may have recorded it first."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "r+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            known, _ = read_known_hosts(path, name)
            if any(kt == ktype and b == blob for kt, b in known):
                return
            if known:
                raise Unreachable(f"HOST KEY CHANGED for {name}: known_hosts has "
                                  f"{fingerprint(known[0][1])}, host offers {fp}; refusing to connect")
            f.seek(0, os.SEEK_END)
            lead = b""
            if f.tell() > 0:
                f.seek(-1, os.SEEK_END)
                lead = b"" if f.read(1) == b"\n" else b"\n"
            line = f"{name} {ktype} {base64.b64encode(blob).decode()}\n"
            f.write(lead + line.encode())
            f.flush()
            os.fsync(f.fileno())
            log.info("recorded new host key for %s (%s %s) in %s", name, ktype, fp, path)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
