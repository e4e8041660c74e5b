"""What a client needs to reach the lab: its known_hosts (every host key on its port) and an
Ansible-style inventory (group `lab`, plus one group per mixed-host kind)."""
from __future__ import annotations

import os

from fleetops.lab.rootfs import KINDS, needs_emulation
from fleetops.lab.procs import read_text

EMULATED_CONNECT_TIMEOUT = 60.0   # seconds; an sshd under qemu on a loaded CI box is slow to kex


def inventory_vars(h: dict, key_path: str) -> dict:
    """Ansible-style host vars that reach lab host `h` with the lab key."""
    out = {"ansible_host": "127.0.0.1", "ansible_port": h["port"], "ansible_user": h["user"],
           "ansible_ssh_private_key_file": key_path}
    if h.get("kind") and needs_emulation(h["kind"]):
        out["fleetops_connect_timeout"] = EMULATED_CONNECT_TIMEOUT   # its sshd runs under qemu
    return out


def write_known_hosts(hosts: list, path: str) -> None:
    lines = []
    for h in hosts:
        pub = read_text(h["host_key"] + ".pub").split()
        lines.append(f"[127.0.0.1]:{h['port']} {pub[0]} {pub[1]}")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def write_inventory(hosts: list, path: str, key_path: str, known_hosts_path: str) -> None:
    import yaml

    inv = {"all": {"children": {"lab": {
        "hosts": {h["name"]: inventory_vars(h, key_path) for h in hosts},
        "vars": {"fleetops_known_hosts": known_hosts_path},
    }}}}
    for kind in KINDS:        # mixed hosts are also in a group named after their kind
        members = [h["name"] for h in hosts if h.get("kind") == kind]
        if members:
            inv["all"]["children"][KINDS[kind]["group"]] = {"hosts": {m: None for m in members}}
    with open(path, "w") as f:
        f.write("# written by `fleetops lab up`; regenerated on every up\n")
        yaml.safe_dump(inv, f, sort_keys=False)
