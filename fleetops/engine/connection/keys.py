"""Private keys and the ssh-agent: which key a connection offers, and which key ssh would refuse.

A key checked before any host is contacted turns "authentication failed" on a thousand hosts
into one line naming the file and the remedy.
"""
from __future__ import annotations

import base64
import os
import re
import stat

import paramiko

from fleetops.engine.connection.filecache import cached
from fleetops.errors import BadInput

DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")


def open_agent():
    """(agent or None, its keys); the caller closes the agent once done signing."""
    if not os.environ.get("SSH_AUTH_SOCK"):
        return None, []
    try:
        agent = paramiko.Agent()
    except (paramiko.SSHException, OSError):
        return None, []
    keys = list(agent.get_keys())
    if not keys:
        agent.close()
        return None, []
    return agent, keys


def key_is_encrypted(path: str) -> bool:
    """True if a private key file needs a passphrase (OpenSSH or PEM format)."""
    with open(path, "rb") as f:
        text = f.read(1 << 20)
    if b"Proc-Type: 4,ENCRYPTED" in text or b"BEGIN ENCRYPTED PRIVATE KEY" in text:
        return True
    m = re.search(rb"-----BEGIN OPENSSH PRIVATE KEY-----(.*?)-----END", text, re.S)
    if m:
        try:
            raw = base64.b64decode(b"".join(m.group(1).split()))
        except ValueError:
            return False
        magic = b"openssh-key-v1\0"
        if raw.startswith(magic):
            n = int.from_bytes(raw[len(magic):len(magic) + 4], "big")
            return raw[len(magic) + 4:len(magic) + 4 + n] != b"none"
    return False


def load_private_key(path: str):
    """PKey from a file; PasswordRequiredException if it is encrypted (any paramiko version).
    Read once per run for all hosts (re-read if the file changes)."""
    return cached("private_key", path, _load_private_key)


def _load_private_key(path: str):
    if key_is_encrypted(path):
        raise paramiko.PasswordRequiredException(f"private key {path} is encrypted")
    try:
        return paramiko.PKey.from_path(path)
    except TypeError as e:          # cryptography's "password-protected" on some versions
        if "password" in str(e).lower():
            raise paramiko.PasswordRequiredException(f"private key {path} is encrypted") from e
        raise paramiko.SSHException(str(e)) from e


def check_private_key(path: str) -> None:
    """Refuse, before any host is contacted, a key ssh itself would refuse or could not use."""
    p = os.path.expanduser(path)
    if not os.path.exists(p):
        raise BadInput(f"private key {path} does not exist")
    if not os.path.isfile(p):
        raise BadInput(f"private key {path} is not a file")
    mode = stat.S_IMODE(os.stat(p).st_mode)
    if mode & 0o077:
        raise BadInput(f"private key {path} has mode {mode:04o}; ssh refuses keys readable by others: "
                       f"chmod 600 {path}")
    try:
        load_private_key(p)
    except paramiko.PasswordRequiredException:
        agent, keys = open_agent()
        if agent is not None:
            agent.close()
        if not keys:
            raise BadInput(f"private key {path} is encrypted and no ssh-agent is available; "
                           f"load it with ssh-add, or use an unencrypted key") from None
    except (paramiko.SSHException, ValueError, OSError) as e:
        raise BadInput(f"private key {path} cannot be read: {e}") from e
