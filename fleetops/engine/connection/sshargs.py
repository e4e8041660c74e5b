"""OpenSSH command-line options from ansible.cfg's `[ssh_connection] ssh_args` and the
`ansible_ssh_common_args` / `ansible_ssh_extra_args` variables, mapped onto fleetops' own
connection (paramiko, not the ssh binary).

The options that change where or how a host is reached are honoured: UserKnownHostsFile,
StrictHostKeyChecking (no / accept-new learn a new host's key, a changed key is still refused:
checking is never switched off), ProxyJump (`-J`), ProxyCommand, IdentityFile (`-i`),
IdentitiesOnly, ConnectTimeout, ServerAliveInterval, Port (`-p`), User (`-l`). OpenSSH's connection
sharing and compression (`-C`, ControlMaster, ControlPersist, ControlPath) change nothing here:
fleetops already keeps one connection per host. Anything else is refused with the place it was
written, never passed over: an option fleetops cannot honour would make the run reach hosts
other than the operator meant.
"""
from __future__ import annotations

import os
import shlex

from fleetops.errors import BadInput

HONOURED = ("UserKnownHostsFile", "StrictHostKeyChecking", "ProxyJump", "ProxyCommand", "IdentityFile",
            "IdentitiesOnly", "ConnectTimeout", "ServerAliveInterval", "Port", "User")
NO_EFFECT = ("ControlMaster", "ControlPersist", "ControlPath", "Compression", "ServerAliveCountMax")
_FLAGS = {"-J": "ProxyJump", "-i": "IdentityFile", "-p": "Port", "-l": "User"}
_CANONICAL = {k.lower(): k for k in HONOURED + NO_EFFECT}


def parse(text: str, where: str) -> list:
    """[(Option, value)] in the order written; BadInput (at `where`) for what fleetops cannot honour."""
    try:
        words = shlex.split(text or "")
    except ValueError as exc:
        raise BadInput(f"ssh arguments {text!r}: {exc}", where=where) from None
    out, i = [], 0
    while i < len(words):
        w = words[i]
        if w == "-C":
            i += 1
            continue
        if w.startswith("-o"):
            spec = w[2:] if len(w) > 2 else (words[i + 1] if i + 1 < len(words) else "")
            i += 1 if len(w) > 2 else 2
            key, sep, value = spec.partition("=")
            if not sep:
                key, _, value = spec.strip().partition(" ")
                if not value and i < len(words) and not words[i].startswith("-"):
                    value, i = words[i], i + 1
            name = _CANONICAL.get(key.strip().lower())
            if name is None:
                raise BadInput(f"ssh option {key.strip()!r} is not supported (fleetops honours "
                               f"{', '.join(HONOURED)})", where=where)
            if name not in NO_EFFECT:
                out.append((name, value.strip()))
            continue
        flag = w[:2]
        if flag in _FLAGS:
            value = w[2:] if len(w) > 2 else (words[i + 1] if i + 1 < len(words) else "")
            if not value:
                raise BadInput(f"ssh argument {flag} needs a value", where=where)
            out.append((_FLAGS[flag], value))
            i += 1 if len(w) > 2 else 2
            continue
        raise BadInput(f"ssh argument {w!r} is not supported (fleetops honours -o with "
                       f"{', '.join(HONOURED)}, and -J, -i, -p, -l)", where=where)
    return out


# option -> the ConnParams field a connection variable (ansible_port, ...) sets
_FIELD = {"Port": "port", "User": "user", "IdentityFile": "key_file", "ProxyJump": "proxy_jump",
          "UserKnownHostsFile": "known_hosts"}


def apply(params, sources, keep=()) -> None:
    """Set ConnParams from [(text, where)] in OpenSSH's precedence: the first value of an option
    wins (ssh_args, then ansible_ssh_common_args, then ansible_ssh_extra_args, as Ansible orders
    them on the command line). Fields in `keep` were set by a connection variable, which wins."""
    seen: dict = {}
    for text, where in sources:
        for name, value in parse(text, where):
            if name not in seen:
                seen[name] = (value, where)
    for name, (value, where) in seen.items():
        if _FIELD.get(name) not in keep:
            _set(params, name, value, where)


def _set(p, name: str, value: str, where: str) -> None:
    def number(kind=float):
        try:
            n = kind(value)
            if n <= 0:
                raise ValueError
            return n
        except ValueError:
            raise BadInput(f"ssh option {name} must be a positive number, not {value!r}", where=where) from None
    if name == "UserKnownHostsFile":
        path = value.split()[0] if value.split() else ""
        if path in ("", "/dev/null", "none"):
            raise BadInput(f"UserKnownHostsFile={value or '(empty)'} would switch host key checking off: fleetops "
                           "never does; name a known_hosts file (StrictHostKeyChecking=accept-new learns new hosts)",
                           where=where)
        p.known_hosts = os.path.expanduser(path)
    elif name == "StrictHostKeyChecking":
        v = value.lower()
        if v in ("no", "off", "accept-new", "false"):
            p.accept_new_host_keys = True          # a new key is learnt, a changed one still refused
        elif v not in ("yes", "ask", "true", "on"):
            raise BadInput(f"StrictHostKeyChecking must be yes, accept-new or no, not {value!r}", where=where)
    elif name == "ProxyJump":
        p.proxy_jump = None if value.lower() == "none" else value
    elif name == "ProxyCommand":
        p.extra["proxy_command"] = None if value.lower() == "none" else value
    elif name == "IdentityFile":
        p.key_file = os.path.expanduser(value)
    elif name == "IdentitiesOnly":
        p.extra["identities_only"] = value.lower() in ("yes", "true", "on")
    elif name == "ConnectTimeout":
        p.connect_timeout = number()
    elif name == "ServerAliveInterval":
        p.keepalive = number(int)
    elif name == "Port":
        p.port = number(int)
    elif name == "User":
        p.user = value
