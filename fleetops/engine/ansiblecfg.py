"""ansible.cfg, found and read as ansible-core does, for the settings a fleet run uses.

The first that exists of $ANSIBLE_CONFIG, ./ansible.cfg (not in a world-writable directory, as
ansible-core refuses it there), ~/.ansible.cfg, /etc/ansible/ansible.cfg; no merging. The
ANSIBLE_* environment variables win over the file, as in Ansible. Relative paths are taken from
the file's directory.
"""
from __future__ import annotations

import configparser
import os
import stat
from typing import Any
from dataclasses import dataclass, field

from fleetops.engine.boolean import parse_bool
from fleetops.errors import BadInput


@dataclass
class AnsibleConfig:
    path: str | None = None
    inventory: list = field(default_factory=list)
    remote_user: str | None = None
    private_key_file: str | None = None
    forks: int | None = None
    host_key_checking: bool | None = None
    timeout: float | None = None
    roles_path: list = field(default_factory=list)
    # [ssh_connection] ssh_args and the ssh_common_args / ssh_extra_args defaults: [(text, where)]
    ssh_args: list = field(default_factory=list)


# setting -> (section, key, environment variable)
_SETTINGS = {
    "inventory": ("defaults", "inventory", "ANSIBLE_INVENTORY"),
    "remote_user": ("defaults", "remote_user", "ANSIBLE_REMOTE_USER"),
    "private_key_file": ("defaults", "private_key_file", "ANSIBLE_PRIVATE_KEY_FILE"),
    "forks": ("defaults", "forks", "ANSIBLE_FORKS"),
    "host_key_checking": ("defaults", "host_key_checking", "ANSIBLE_HOST_KEY_CHECKING"),
    "timeout": ("defaults", "timeout", "ANSIBLE_TIMEOUT"),
    "roles_path": ("defaults", "roles_path", "ANSIBLE_ROLES_PATH"),
    "ssh_args": ("ssh_connection", "ssh_args", "ANSIBLE_SSH_ARGS"),
    "ssh_common_args": ("ssh_connection", "ssh_common_args", "ANSIBLE_SSH_COMMON_ARGS"),
    "ssh_extra_args": ("ssh_connection", "ssh_extra_args", "ANSIBLE_SSH_EXTRA_ARGS"),
}


def find_config(cwd: str | None = None, env=None) -> str | None:
    env = os.environ if env is None else env
    cwd = cwd or os.getcwd()
    candidates = []
    if env.get("ANSIBLE_CONFIG"):
        p = os.path.expanduser(env["ANSIBLE_CONFIG"])
        candidates.append(os.path.join(p, "ansible.cfg") if os.path.isdir(p) else p)
    try:
        world_writable = bool(os.stat(cwd).st_mode & stat.S_IWOTH)
    except OSError:
        world_writable = True
    if not world_writable:
        candidates.append(os.path.join(cwd, "ansible.cfg"))
    candidates += [os.path.expanduser("~/.ansible.cfg"), "/etc/ansible/ansible.cfg"]
    return next((c for c in candidates if os.path.isfile(c)), None)


def _bool(text: str, where: str | None, key: str) -> bool:
    flag = parse_bool(text)
    if flag is not None:
        return flag
    raise BadInput(f"ansible.cfg: '{key}' must be true or false, not {text!r}", where=where)


def load_config(path: str | None = None, env=None, cwd: str | None = None) -> AnsibleConfig:
    """The settings of the ansible.cfg ansible-core would use (or of `path`); empty when none."""
    env = os.environ if env is None else env
    path = path or find_config(cwd, env)
    cfg = AnsibleConfig(path=path)
    parser = configparser.ConfigParser(inline_comment_prefixes=(";",), interpolation=None, strict=False)
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                parser.read_file(fh)
        except (OSError, configparser.Error, UnicodeDecodeError) as exc:
            raise BadInput(f"cannot read ansible.cfg: {str(exc).splitlines()[0]}", where=path) from None
    base = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
    for name, (section, key, var) in _SETTINGS.items():
        value: Any
        here: str | None
        if var in env:
            raw, here, rel = env[var], f"${var}", os.getcwd()
        elif parser.has_option(section, key):
            raw, here, rel = parser.get(section, key), path, base
        else:
            continue
        if name in ("inventory", "roles_path"):
            sep = "," if name == "inventory" else ":"
            value = [os.path.normpath(os.path.join(rel, os.path.expanduser(p.strip())))
                     for p in raw.split(sep) if p.strip()]
        elif name == "private_key_file":
            value = os.path.normpath(os.path.join(rel, os.path.expanduser(raw.strip())))
        elif name == "host_key_checking":
            value = _bool(raw, here, key)
        elif name in ("forks", "timeout"):
            try:
                value = int(raw) if name == "forks" else float(raw)
                if value <= 0:
                    raise ValueError
            except ValueError:
                raise BadInput(f"ansible.cfg: '{key}' must be a positive number, not {raw!r}", where=here) from None
        elif name.startswith("ssh_"):
            if raw.strip():                  # ssh_args first: OpenSSH keeps an option's first value
                cfg.ssh_args.append((raw.strip(), f"{here} [{section}] {key}" if here == path else here))
            continue
        else:
            value = raw.strip() or None
        setattr(cfg, name, value)
    return cfg
