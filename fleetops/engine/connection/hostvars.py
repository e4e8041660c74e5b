"""Where a host's variables become its connection: -e > fleetops_* > ansible_* > ~/.ssh/config
> ansible.cfg > defaults, resolved into one ConnParams.

Every connection variable is checked here, with the file:line of the variable that set it, so
a bad port or an unreadable template is one error line before any host is contacted.
"""
from __future__ import annotations

import os

from fleetops.engine.boolean import parse_bool
from fleetops.engine.connection import sshargs as _sshargs
from fleetops.engine.connection import sshconfig as _sshconfig
from fleetops.engine.connection.transport import CONNECTIONS, ConnDefaults, ConnParams, connection_name
from fleetops.engine.templating import TemplateError
from fleetops.engine.yamlsrc import yaml_kind
from fleetops.errors import BadInput


def connection_params(hostname: str, variables: dict, origins: dict, *, where: str | None,
                      defaults: ConnDefaults, ssh_configs: dict, ssh_config_path: str | None = None,
                      render=None, extra_vars: dict | None = None,
                      remote_user: str | None = None, connection: str | None = None) -> ConnParams:
    """Resolve how to reach a host from what is passed down: its `variables` (with the file:line
    each came from, `origins`; `where` for the rest), ansible.cfg's `defaults`, the parsed
    ssh_config files (`ssh_configs`, a cache by path): -e > fleetops_* vars > ansible_* vars >
    ssh_config > defaults.

    As in Ansible, `-e ansible_host=...` (or port, user, key file) changes where fleetops
    connects, and a play's or task's `remote_user` (`connection`) applies only where no user
    (`ansible_connection`) variable is set.
    `render` templates a templated value (the caller passes its Jinja2 renderer over
    `template_vars`); without it a templated connection variable is BadInput.
    """
    variables, origins = dict(variables), dict(origins)
    for key, value in (extra_vars or {}).items():
        variables[key] = value
        origins[key] = "-e"

    def pick(*names):
        for n in names:
            value = variables.get(n)
            if value is None or value == "":
                continue
            if isinstance(value, str) and ("{{" in value or "{%" in value):
                if render is None:
                    raise BadInput(f"host '{hostname}': connection variable '{n}' is a template "
                                   f"({value!r}) and nothing here can render it",
                                   where=origins.get(n) or where)
                try:
                    value = render(value)
                except TemplateError as exc:
                    raise BadInput(f"host '{hostname}': connection variable '{n}': {exc.msg} (inventory "
                                   "variables, -e, groups and ansible_playbook_python apply here)",
                                   where=origins.get(n) or where) from None
            return n, value
        return None, None

    def bad(name, msg):
        return BadInput(f"host '{hostname}': variable '{name}' {msg}", where=origins.get(name) or where)

    def as_str(name, value):
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise bad(name, f"must be a string, got {yaml_kind(value)}")
        return str(value)

    host_var, host_value = pick("fleetops_host", "ansible_host", "ansible_ssh_host")
    lookup_key = as_str(host_var, host_value) if host_var else hostname
    ssh = _sshconfig.lookup(lookup_key, ssh_config_path, cache=ssh_configs)

    port_var, port_value = pick("fleetops_port", "ansible_port", "ansible_ssh_port")
    if port_var:
        port = _int_port(port_value)
        if port is None:
            raise bad(port_var, f"must be an integer port 1-65535, got {port_value!r}")
    else:
        port = ssh.port or 22

    user_var, user_value = pick("fleetops_user", "ansible_user", "ansible_ssh_user")
    user = as_str(user_var, user_value) if user_var else (
        remote_user or defaults.remote_user or ssh.user)

    key_var, key_value = pick("fleetops_ssh_private_key_file", "fleetops_private_key_file",
                              "ansible_ssh_private_key_file", "ansible_private_key_file")
    key_file = os.path.expanduser(as_str(key_var, key_value)) if key_var else (
        defaults.private_key_file or ssh.identity_file)

    py_var, py_value = pick("fleetops_python_interpreter", "ansible_python_interpreter")
    become_var, become_value = pick("fleetops_become_user", "ansible_become_user")
    jump_var, jump_value = pick("fleetops_proxy_jump")
    kh_var, kh_value = pick("fleetops_known_hosts")

    params = ConnParams(
        name=hostname,
        address=ssh.hostname or lookup_key,
        port=port,
        user=user,
        key_file=key_file,
        python=as_str(py_var, py_value) if py_var else None,
        become_user=as_str(become_var, become_value) if become_var else None,
        proxy_jump=as_str(jump_var, jump_value) if jump_var else ssh.proxy_jump,
        known_hosts=os.path.expanduser(as_str(kh_var, kh_value)) if kh_var else None,
    )
    if defaults.timeout:
        params.connect_timeout = float(defaults.timeout)
    sources = list(defaults.ssh_args)        # ansible.cfg [ssh_connection]
    for var in ("ansible_ssh_common_args", "ansible_ssh_extra_args"):
        name, value = pick(var)
        if name:
            sources.append((as_str(name, value), origins.get(name) or where))
    if sources:
        keep = {f for f, var in (("port", port_var), ("user", user_var), ("key_file", key_var),
                                 ("proxy_jump", jump_var), ("known_hosts", kh_var)) if var}
        _sshargs.apply(params, sources, keep)
    conn_var, conn_value = pick("ansible_connection")
    if conn_var:
        found = connection_name(as_str(conn_var, conn_value))
        if found is None:
            raise bad(conn_var, f"names a connection fleetops does not have ({conn_value!r}; it has "
                                f"{', '.join(CONNECTIONS)})")
        params.connection = found
    elif connection:
        params.connection = connection
    bvar, bvalue = pick("fleetops_become", "ansible_become")
    if bvar:
        flag = parse_bool(bvalue)
        if flag is None:
            raise bad(bvar, f"must be true or false, got {bvalue!r}")
        params.become = flag
    for var, attr in (("fleetops_connect_timeout", "connect_timeout"),
                      ("fleetops_command_timeout", "command_timeout")):
        name, value = pick(var)
        if name:
            seconds = _positive_number(value)
            if seconds is None:
                raise bad(name, f"must be a number of seconds > 0, got {value!r}")
            setattr(params, attr, seconds)
    return params



def _int_port(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int) and 1 <= value <= 65535:
        return value
    return None


def _positive_number(value):
    if isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if seconds > 0 else None
