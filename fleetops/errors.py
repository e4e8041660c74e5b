"""Errors that cross package boundaries, each mapped to one exit code.

Exit codes (docs/reference/exit-codes.md, generated from cli.EXIT_CODES): 0 all ok; 2 a host failed; 3 a host
unreachable and none failed; 4 bad input (nothing was run); 130 interrupted.
"""
from __future__ import annotations

EXIT_OK = 0
EXIT_HOST_FAILED = 2
EXIT_UNREACHABLE = 3
EXIT_BAD_INPUT = 4
EXIT_INTERRUPTED = 130


class FleetopsError(Exception):
    """Base class; `exit_code` says how the CLI ends when this escapes."""

    exit_code = 1


class BadInput(FleetopsError):
    """Bad inventory, playbook, variable or argument: nothing was run.

    `where` is "file:line:column" (or "file", or None) and is printed first,
    so the operator sees one line saying what and where.
    """

    exit_code = EXIT_BAD_INPUT

    def __init__(self, msg: str, where: str | None = None):
        super().__init__(msg)
        self.msg = msg
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.msg}" if self.where else self.msg


class Unreachable(FleetopsError):
    """A host could not be connected to (network, auth, host key)."""

    exit_code = EXIT_UNREACHABLE
