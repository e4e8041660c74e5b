"""OpenSSH arguments (ansible.cfg `[ssh_connection] ssh_args`, `ansible_ssh_common_args`,
`ansible_ssh_extra_args`) mapped onto fleetops' connection: unit checks of the mapping and its
refusals, then real sshd lab hosts reached through them (known_hosts file, accept-new, a
ProxyCommand relay, IdentitiesOnly)."""
from __future__ import annotations

import os
import textwrap

import pytest
import yaml

from fleetops.engine.ansiblecfg import load_config
from fleetops.engine.connection import sshargs
from fleetops.engine.connection.ssh import SSHTransport
from fleetops.engine.connection.transport import ConnParams
from fleetops.engine.inventory import load_inventory
from fleetops.errors import BadInput
from tests.executor.conftest import run_yaml


def params(**kw):
    return ConnParams(name="h", address="10.0.0.1", **kw)


def test_options_map_onto_the_connection():
    p = params()
    sshargs.apply(p, [("-C -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=~/kh "
                       "-oStrictHostKeyChecking=accept-new -o 'ProxyCommand=ssh -W %h:%p bastion' "
                       "-o IdentitiesOnly=yes -i /k/id -J jump:2222 -o ConnectTimeout 7", "ansible.cfg")])
    assert p.known_hosts == os.path.expanduser("~/kh") and p.accept_new_host_keys
    assert p.extra["proxy_command"] == "ssh -W %h:%p bastion" and p.extra["identities_only"]
    assert p.key_file == "/k/id" and p.proxy_jump == "jump:2222" and p.connect_timeout == 7.0


def test_first_value_wins_and_connection_variables_win():
    p = params(port=2200)
    sshargs.apply(p, [("-o Port=1 -o User=a", "cfg"), ("-o Port=2 -o User=b -o ServerAliveInterval=9", "var")],
                  keep={"port"})
    assert (p.port, p.user, p.keepalive) == (2200, "a", 9)


@pytest.mark.parametrize("text, fragment", [
    ("-o ForwardAgent=yes", "ssh option 'ForwardAgent' is not supported"),
    ("-A", "ssh argument '-A' is not supported"),
    ("-o UserKnownHostsFile=/dev/null", "would switch host key checking off"),
    ("-o StrictHostKeyChecking=maybe", "StrictHostKeyChecking must be"),
    ("-o ConnectTimeout=soon", "must be a positive number"),
    ("-o 'unclosed", "No closing quotation"),
])
def test_refusals_say_where(text, fragment):
    with pytest.raises(BadInput) as exc:
        sshargs.apply(params(), [(text, "inv.yml:4:30")])
    assert fragment in exc.value.msg and exc.value.where == "inv.yml:4:30"


def test_ansible_cfg_ssh_args_with_its_place(tmp_path):
    cfg = tmp_path / "ansible.cfg"
    cfg.write_text("[ssh_connection]\nssh_args = -o ForwardX11=yes\n")
    got = load_config(str(cfg), env={})
    assert got.ssh_args == [("-o ForwardX11=yes", f"{cfg} [ssh_connection] ssh_args")]
    assert load_config(str(cfg), env={"ANSIBLE_SSH_ARGS": "-C"}).ssh_args == [("-C", "$ANSIBLE_SSH_ARGS")]


def test_an_inventory_variable_refused_at_its_line(tmp_path):
    inv = tmp_path / "inv.yml"
    inv.write_text(textwrap.dedent("""
        all:
          hosts:
            web1:
              ansible_ssh_common_args: "-o ForwardAgent=yes"
    """))
    with pytest.raises(BadInput) as exc:
        load_inventory(str(inv)).connection_params("web1")
    assert "ForwardAgent" in exc.value.msg and exc.value.where.endswith("inv.yml:5:7")


# ---------------------------------------------------------------- on the lab

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
