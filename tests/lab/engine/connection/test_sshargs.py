"""Real sshd lab hosts reached through OpenSSH arguments (`ansible_ssh_common_args`,
`ansible_ssh_extra_args`): a known_hosts file named only by them, accept-new against strict, a
ProxyCommand relay every connection goes through, IdentitiesOnly."""
from __future__ import annotations

import pytest
import yaml

from fleetops.engine.connection.ssh import SSHTransport
from tests.support.playbook_run import run_yaml

RELAY = """
import os, socket, sys, threading
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])))
with open(sys.argv[3], "a") as f:
    f.write(sys.argv[1] + ":" + sys.argv[2] + "\\n")
def up():
    while True:
        data = os.read(0, 65536)
        if not data:
            break
        conn.sendall(data)
    conn.shutdown(socket.SHUT_WR)
threading.Thread(target=up, daemon=True).start()
while True:
    data = conn.recv(65536)
    if not data:
        break
    os.write(1, data)
"""
PLAY = """
- hosts: lab
  gather_facts: false
  tasks:
    - name: who
      command: whoami
"""


def _inventory(lab, per_host: dict) -> str:
    inv = yaml.safe_load(open(lab.inventory_path))
    group = inv["all"]["children"]["lab"]
    group.get("vars", {}).pop("fleetops_known_hosts", None)     # only the ssh arguments say where it is
    for h in group["hosts"].values():
        h.update(per_host)
    return yaml.safe_dump(inv)


@pytest.mark.lab
def test_lab_hosts_reached_through_ssh_arguments(lab, tmp_path):
    relay = tmp_path / "relay.py"
    relay.write_text(RELAY)
    log = tmp_path / "relay.log"
    inv = _inventory(lab, {
        "ansible_ssh_common_args": f"-C -o ControlMaster=auto -o ControlPersist=60s "
                                   f"-o UserKnownHostsFile={lab.known_hosts_path} -o StrictHostKeyChecking=yes "
                                   "-o IdentitiesOnly=yes",
        "ansible_ssh_extra_args": f"-o ProxyCommand='python3 {relay} %h %p {log}'"})
    outcome, rec = run_yaml(tmp_path, PLAY, inventory=inv, transport_factory=SSHTransport)
    assert outcome.exit_code == 0, rec.failures()
    users = {h["name"]: h["user"] for h in lab.hosts}
    assert {h: r["stdout"] for h, r in rec.results("who").items()} == users
    relayed = log.read_text().split()
    assert sorted(relayed) == sorted(f"127.0.0.1:{h['port']}" for h in lab.hosts)   # every host came through it


@pytest.mark.lab
def test_lab_accept_new_learns_keys_strict_refuses_them(lab, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    strict = _inventory(lab, {"ansible_ssh_common_args": f"-o UserKnownHostsFile={kh} -o StrictHostKeyChecking=yes"})
    outcome, rec = run_yaml(tmp_path, PLAY, inventory=strict, transport_factory=SSHTransport)
    assert outcome.exit_code == 3
    assert all("not in known_hosts" in r["msg"] for r in rec.results("who").values())
    assert kh.read_text() == ""
    learn = _inventory(lab, {"ansible_ssh_common_args": f"-o UserKnownHostsFile={kh} -o StrictHostKeyChecking=accept-new"})
    outcome, rec = run_yaml(tmp_path, PLAY, inventory=learn, transport_factory=SSHTransport)
    assert outcome.exit_code == 0, rec.failures()
    assert len(kh.read_text().splitlines()) == len(lab.hosts)
