"""Host declarations as ansible-core writes them: ranges (`web[01:10]`, `db-[a:c]`) and
`host:port`."""
from __future__ import annotations

import re
import string

from fleetops.errors import BadInput

_RANGE_RE = re.compile(r"\[[^\[\]]*:[^\[\]]*\]")


def expand_host_range(pattern: str, where: str | None = None) -> list:
    """Expand Ansible host ranges: web[01:03] -> web01..web03, db[a:c], n[0:10:5]."""
    m = _RANGE_RE.search(pattern)
    if not m:
        return [pattern]
    head, body, tail = pattern[:m.start()], pattern[m.start() + 1:m.end() - 1], pattern[m.end():]
    bounds = body.split(":")
    if len(bounds) not in (2, 3):
        raise BadInput(f"bad host range '{pattern}': must be [begin:end] or [begin:end:step]", where=where)
    beg, end = bounds[0] or "0", bounds[1]
    step_text = bounds[2] if len(bounds) == 3 else "1"
    if not end:
        raise BadInput(f"bad host range '{pattern}': no end value", where=where)
    try:
        step = int(step_text)
        if step < 1:
            raise ValueError
    except ValueError:
        raise BadInput(f"bad host range '{pattern}': step must be a positive integer", where=where) from None
    if beg in string.ascii_letters and end in string.ascii_letters:
        i_beg, i_end = string.ascii_letters.index(beg), string.ascii_letters.index(end)
        if i_beg > i_end:
            raise BadInput(f"bad host range '{pattern}': begin is after end", where=where)
        seq = list(string.ascii_letters[i_beg:i_end + 1:step])
    else:
        if not (beg.isdigit() and end.isdigit()):
            raise BadInput(f"bad host range '{pattern}': bounds must be numbers or single letters",
                           where=where)
        if beg[0] == "0" and len(beg) > 1 and len(beg) != len(end):
            raise BadInput(f"bad host range '{pattern}': zero-padded begin and end must have equal length",
                           where=where)
        if int(beg) > int(end):
            raise BadInput(f"bad host range '{pattern}': begin is after end", where=where)
        width = len(beg) if beg[0] == "0" and len(beg) > 1 else 0
        seq = [str(i).zfill(width) for i in range(int(beg), int(end) + 1, step)]
    out = []
    for item in seq:
        out.extend(expand_host_range(head + item + tail, where))
    return out


_PORT_RE = re.compile(r"^(?P<host>.+):(?P<port>\d+)$")


def split_host_port(text: str):
    """'host:22' -> ('host', 22); '[::1]:22' -> ('::1', 22); bare IPv6 and ranges have no port."""
    text = text.strip()
    m = re.match(r"^\[([0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)\](?::(\d+))?$", text)
    if m:
        return m.group(1), int(m.group(2)) if m.group(2) else None
    m = _PORT_RE.match(text)
    if m and ":" not in _RANGE_RE.sub("", m.group("host")):
        return m.group("host"), int(m.group("port"))
    return text, None
