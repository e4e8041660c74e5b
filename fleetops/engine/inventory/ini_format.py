"""The INI inventory format: [group], [group:children], [group:vars], host lines with
key=value variables, values read as Python literals where they are one (as ansible-core)."""
from __future__ import annotations

import ast
import re
import shlex
import sys
import warnings

from fleetops.engine.inventory.builder import Builder
from fleetops.engine.inventory.hostnames import expand_host_range, split_host_port
from fleetops.errors import BadInput

_SECTION_RE = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")
_GROUPNAME_RE = re.compile(r"^([^:\]\s]+)\s*(?:[#;].*)?$")


# Text that can only be a string to ast.literal_eval: a name (not True/False/None) with no quote,
# bracket or operator that could make it an expression, or a dotted run of numbers (an address);
# a plain decimal is the int literal_eval makes of it.
# A fleet's inventory is mostly such values; deciding them without compiling keeps 50,000 host
# lines fast, and the result is the same as literal_eval's.
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-/:@]*")
_DOTTED_NUMBERS = re.compile(r"[0-9]+(?:\.[0-9]+){2,}")
_DECIMAL = re.compile(r"[1-9][0-9]{0,17}|0")
_KEYWORD_LITERALS = {"True": True, "False": False, "None": None}


def parse_ini_value(text: str):
    """Ansible's INI value rule: a Python literal if it is one (5, True, 'x', [1]), else the string."""
    if text in _KEYWORD_LITERALS:
        return _KEYWORD_LITERALS[text]
    if _PLAIN_NAME.fullmatch(text) or _DOTTED_NUMBERS.fullmatch(text):
        return text
    if _DECIMAL.fullmatch(text):
        return int(text)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def parse_ini(b: Builder, text: str, path: str) -> None:
    group, state = "ungrouped", "hosts"
    declared: set = {"all", "ungrouped"}
    pending_vars: dict = {}        # group -> where of its first [g:vars]
    pending_children: dict = {}    # child -> (parent, where)
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        col = len(raw) - len(raw.lstrip()) + 1
        where = f"{path}:{lineno}:{col}"
        m = _SECTION_RE.match(line)
        if m:
            group, state = m.group(1), m.group(2) or "hosts"
            if state not in ("hosts", "children", "vars"):
                raise BadInput(f"section [{group}:{state}] has unknown type '{state}' "
                               f"(expected [{group}], [{group}:children] or [{group}:vars])", where=where)
            b.group(group, where)
            if state == "vars":
                if group not in declared:
                    pending_vars.setdefault(group, where)
            else:
                declared.add(group)
            continue
        first = line.split()[0]
        if line.startswith("[") and (line.endswith("]") or first.count("[") != first.count("]")):
            # a host line may start with a range ([a:f]web.example.org); an unclosed one is neither
            raise BadInput(f"invalid section header '{line}' (expected [group], [group:children] "
                           f"or [group:vars], without spaces)", where=where)
        if state == "hosts":
            _ini_host_line(b, group, raw, line, where, path, lineno)
        elif state == "vars":
            if "=" not in line:
                raise BadInput(f"expected key=value in [{group}:vars], got '{line}'", where=where)
            key, value = (part.strip() for part in line.split("=", 1))
            if not key:
                raise BadInput(f"missing variable name in [{group}:vars]: '{line}'", where=where)
            b.set_group_var(group, key, parse_ini_value(value), where)
        else:
            cm = _GROUPNAME_RE.match(line)
            if not cm:
                raise BadInput(f"expected a group name in [{group}:children], got '{line}'", where=where)
            child = cm.group(1)
            b.group(child, where)
            b.add_child(group, child, where)
            pending_children.setdefault(child, (group, where))
    for child, (parent, where) in pending_children.items():
        if child not in declared:
            raise BadInput(f"section [{parent}:children] includes undefined group '{child}'", where=where)
    for group, where in pending_vars.items():
        if group not in declared:
            raise BadInput(f"section [{group}:vars] is for undefined group '{group}'", where=where)


# A host line of printable ASCII without quotes, escapes or a comment splits at spaces and tabs
# exactly as shlex does; only the others need shlex's character-by-character reader.
_PLAIN_LINE = re.compile(r"[\x20-\x7e\t]*")
_SHLEX_SPECIAL = re.compile(r"[\"'\\#]")


def _host_line_tokens(line: str, where: str) -> list:
    if _PLAIN_LINE.fullmatch(line) and not _SHLEX_SPECIAL.search(line):
        return line.split()
    try:
        return shlex.split(line, comments=True)
    except ValueError as e:
        raise BadInput(f"cannot parse host line '{line}': {e}", where=where) from None


def _ini_host_line(b: Builder, group: str, raw: str, line: str, where: str, path: str, lineno: int) -> None:
    tokens = _host_line_tokens(line, where)
    if not tokens:
        return
    base, port = split_host_port(tokens[0])
    names = expand_host_range(base, where)
    variables: dict = {}
    wheres: dict = {}
    for token in tokens[1:]:
        if "=" not in token:
            at = raw.find(token)
            raise BadInput(f"expected key=value host variable, got '{token}'",
                           where=f"{path}:{lineno}:{at + 1}" if at >= 0 else where)
        key, value = token.split("=", 1)
        key = sys.intern(key)               # a fleet repeats the same few names on every host line
        if not key:
            raise BadInput(f"missing variable name in '{token}'", where=where)
        variables[key] = parse_ini_value(value)
        at = raw.find(key + "=")
        wheres[key] = f"{path}:{lineno}:{at + 1}" if at >= 0 else where
    if port is not None:
        variables["ansible_port"] = port
        wheres["ansible_port"] = where
    for h in names:
        b.add_host(h, group, variables, wheres, where)
