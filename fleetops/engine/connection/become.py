"""Become: a command run as another user through non-interactive sudo, and sudo's own refusals.

Every transport runs the same wrapped line, so become works the same over SSH and on the
controller; sudo's refusal is told apart from the command's failure by its first stderr line.
"""
from __future__ import annotations

import re
import shlex


def become_wrap(command: str, user: str | None) -> str:
    """Run `command` as `user` through non-interactive sudo (a prompt fails instead of hanging)."""
    if not user:
        return command
    return f"sudo -n -H -u {shlex.quote(user)} -- sh -c {shlex.quote(command)}"


# What sudo itself says when it refuses (it fails before the command runs, so this is the first line).
_SUDO_REFUSED = re.compile(r"^(sudo: .+|Sorry, user .+ is not allowed to execute .+)$")
_SUDO_MISSING = re.compile(r"\bsudo: (command )?not found$")


def become_failure(user: str | None, rc: int, stderr: bytes) -> str | None:
    """The reason when `become_wrap`'s sudo (not the command) failed, else None."""
    if not user or rc in (0, -1):
        return None
    for line in stderr.decode("utf-8", errors="replace").splitlines():
        line = line.strip()
        if not line:
            continue
        if _SUDO_MISSING.search(line):
            return f"become failed: sudo is not installed on the host (become_user {user}): {line}"
        if _SUDO_REFUSED.match(line):
            return (f"become failed: sudo -n -u {user} refused: {line} (become needs a NOPASSWD sudo "
                    f"rule for the login user; fleetops never types a password)")
        return None
    return None
