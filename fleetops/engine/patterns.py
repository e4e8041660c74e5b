"""Ansible host patterns, for a play's `hosts:` and `--limit`.

Forms: all, *, group, host, glob (web*), ~regex, group[0] / group[0:2] subscripts,
unions a:b and a,b, intersection a:&b, exclusion a:!b. Like Ansible, unions
are applied first, then intersections, then exclusions, whatever the written
order; a pattern of only &/! elements starts from `all`.
"""
from __future__ import annotations

import fnmatch
import re

from fleetops.errors import BadInput

_SUBSCRIPT_RE = re.compile(r"^(.+)\[(?:(-?[0-9]+)|([0-9]*)([:-])([0-9]*))\]$")
_GLOB_CHARS = (".", "?", "*", "[")
IMPLICIT_LOCALHOST = ("localhost", "127.0.0.1")   # matched even when not in the inventory (as Ansible)


def split_pattern(pattern: str) -> list:
    """Split into elements on ',' and on ':' outside [..]; an empty element is BadInput."""
    if not isinstance(pattern, str):
        raise BadInput(f"host pattern must be a string, got {pattern!r}")
    if not pattern.strip():
        raise BadInput("empty host pattern")
    elements = []
    for part in pattern.split(","):
        pieces = _split_colons(part)
        for piece in pieces:
            piece = piece.strip()
            if not piece:
                raise BadInput(f"bad host pattern '{pattern}': empty element")
            elements.append(piece)
    return elements


def _split_colons(part: str) -> list:
    """'a:b[1:2]:c' -> ['a', 'b[1:2]', 'c'], keeping empty pieces so they can be reported."""
    pieces: list = []
    current: list = []
    depth = 0
    for ch in part:
        if ch == "[":
            depth += 1
        elif ch == "]" and depth:
            depth -= 1
        if ch == ":" and depth == 0:
            pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
    pieces.append("".join(current))
    return pieces


def _compile(element: str, pattern: str):
    """A matcher for one element (no operator); regex errors are BadInput naming the pattern."""
    if element.startswith("~"):
        body = element[1:]
        if not body:
            raise BadInput(f"bad host pattern '{pattern}': '~' needs a regular expression")
        try:
            return re.compile(body).match
        except re.error as e:
            raise BadInput(f"bad host pattern '{pattern}': invalid regular expression '{body}': {e}") from None
    return re.compile(fnmatch.translate(element)).match


def parse(pattern: str) -> list:
    """Check a pattern's syntax; returns [(op, element)] with op in '', '&', '!', in evaluation order."""
    parsed = []
    for element in split_pattern(pattern):
        op = element[0] if element[0] in "&!" else ""
        body = element[1:].strip() if op else element
        if not body:
            raise BadInput(f"bad host pattern '{pattern}': '{op}' must be followed by a group or host")
        if body[0] in "&!":
            raise BadInput(f"bad host pattern '{pattern}': '{element}' has two operators")
        base, _ = _subscript(body, pattern)
        _compile(base, pattern)
        parsed.append((op, body))
    order = {"": 0, "&": 1, "!": 2}
    parsed.sort(key=lambda item: order[item[0]])   # stable: written order kept within each kind
    if not parsed or parsed[0][0] != "":
        parsed.insert(0, ("", "all"))
    return parsed


def _subscript(body: str, pattern: str):
    """'web[0]' -> ('web', (0, None)); 'web[1:3]' -> ('web', (1, 3)) (end inclusive, as Ansible)."""
    if body.startswith("~"):
        return body, None
    m = _SUBSCRIPT_RE.match(body)
    if not m:
        return body, None
    base, single, start, _sep, end = m.groups()
    if single is not None:
        return base, (int(single), None)
    return base, (int(start or 0), int(end) if end else -1)


def _match_element(body: str, inventory, pattern: str) -> list:
    base, sub = _subscript(body, pattern)
    matcher = _compile(base, pattern)
    groups = [g for g in inventory.groups if matcher(g)]
    hosts: list = []
    seen: set = set()
    for g in groups:
        for h in inventory.group_hosts(g):
            if h not in seen:
                seen.add(h)
                hosts.append(h)
    if not groups or base.startswith("~") or any(c in base for c in _GLOB_CHARS):
        for h in inventory.hosts:
            if h not in seen and matcher(h):
                seen.add(h)
                hosts.append(h)
    if not hosts and base in IMPLICIT_LOCALHOST and hasattr(inventory, "implicit_host"):
        inventory.implicit_host(base)
        hosts = [base]
    if sub is not None:
        start, end = sub
        if end is None:
            try:
                hosts = [hosts[start]]
            except IndexError:
                hosts = []
        else:
            if end == -1:
                end = len(hosts) - 1
            hosts = hosts[start:end + 1]
    return hosts


def match(pattern: str, inventory) -> list:
    """Host names matching `pattern`, in Ansible's order (each element's hosts as its groups list
    them, unions appended); [] when nothing matches (the caller decides).

    `inventory` needs `.hosts` (ordered name -> host), `.groups` (name -> group)
    and `.group_hosts(name)` (hosts of a group and its descendants).
    """
    selected: dict = {}
    for op, body in parse(pattern):
        found = _match_element(body, inventory, pattern)
        if op == "":
            for h in found:
                selected[h] = True
        elif op == "&":
            keep = set(found)
            selected = {h: True for h in selected if h in keep}
        else:
            for h in found:
                selected.pop(h, None)
    return list(selected)
