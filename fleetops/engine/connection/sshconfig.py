"""~/.ssh/config lookups, so hosts reachable with plain `ssh alias` are reachable by fleetops too.

Only what a connection needs is read (HostName, User, Port, first IdentityFile,
ProxyJump); inventory variables override it, as Ansible's -o options do.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import paramiko

from fleetops.errors import BadInput

DEFAULT_PATH = "~/.ssh/config"
_MATCH_EXEC = re.compile(r"(?im)^\s*match\b.*\bexec\b")


def _load_invoke() -> None:
    """paramiko runs `Match exec` through invoke, which engine/__init__ kept out of its import."""
    import paramiko.config as pconfig
    if getattr(pconfig, "invoke", None) is not None:
        return
    try:
        import invoke
    except ImportError as e:
        pconfig.invoke_import_error = e    # paramiko raises it if a Match exec is evaluated
        return
    pconfig.invoke, pconfig.invoke_import_error = invoke, None


@dataclass
class SshHostConfig:
    """What ssh_config says about one host; None where it says nothing."""

    hostname: str | None = None
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    proxy_jump: str | None = None


def load_ssh_config(path: str | None = None) -> paramiko.SSHConfig:
    """Parse an ssh config file; a missing file is an empty config, an unreadable one BadInput."""
    path = os.path.expanduser(path or DEFAULT_PATH)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return paramiko.SSHConfig()
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise BadInput(f"cannot read ssh config: {reason}", where=path) from None
    if _MATCH_EXEC.search(text):
        _load_invoke()
    try:
        return paramiko.SSHConfig.from_text(text)
    except Exception as e:  # paramiko raises ConfigParseError and friends
        raise BadInput(f"cannot parse ssh config: {e}", where=path) from None


def lookup(alias: str, path: str | None = None, cache: dict | None = None) -> SshHostConfig:
    """Resolve one host name or alias through ssh_config. `cache` (path -> config) avoids re-parsing."""
    full = os.path.expanduser(path or DEFAULT_PATH)
    if cache is not None and full in cache:
        config = cache[full]
    else:
        config = load_ssh_config(full)
        if cache is not None:
            cache[full] = config
    try:
        found = config.lookup(alias)
    except Exception as e:  # e.g. `Match exec` without invoke, bad tokens
        raise BadInput(f"ssh config lookup of '{alias}' failed: {e}", where=full) from None
    port = found.get("port")
    if port is not None:
        try:
            port = int(port)
        except ValueError:
            raise BadInput(f"ssh config: Port for '{alias}' is not a number: {port!r}", where=full) from None
    identity = found.get("identityfile") or []
    hostname = found.get("hostname")
    return SshHostConfig(
        hostname=hostname if hostname and hostname != alias else None,
        user=found.get("user"),
        port=port,
        identity_file=os.path.expanduser(identity[0]) if identity else None,
        proxy_jump=found.get("proxyjump"),
    )
