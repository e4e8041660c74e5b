"""What a command's output keeps: the first bytes of each stream, the rest counted, and the note
that says so.

A command that prints gigabytes must not take the controller's memory with it, and a cut
result must never pass for a whole one; every transport reads through these caps.
"""
from __future__ import annotations

MAX_STREAM = 64 * 1024 * 1024     # per stream of one command: payload results can be big
MAX_COMMAND_OUTPUT = 1024 * 1024  # per stream kept of a `command`/`shell` task (rest counted)
READ_CHUNK = 1 << 16


class Capped:
    """Keeps the first `limit` bytes of a stream and remembers whether more came."""

    def __init__(self, limit: int = MAX_STREAM):
        self.parts: list[bytes] = []
        self.size = 0
        self.limit = limit
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.limit - self.size
        if room > 0:
            self.parts.append(data[:room])
            self.size += min(room, len(data))
        self.dropped += max(0, len(data) - max(room, 0))

    def value(self) -> bytes:
        return b"".join(self.parts)


def size_text(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def truncation_note(name: str, c: Capped) -> bytes:
    if not c.dropped:
        return b""
    return (f"\n[fleetops: {name} truncated at {size_text(c.limit)}; "
            f"{c.dropped} more bytes discarded]\n").encode()
