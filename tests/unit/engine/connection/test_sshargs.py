"""OpenSSH arguments (ansible.cfg `[ssh_connection] ssh_args`, `ansible_ssh_common_args`,
`ansible_ssh_extra_args`) mapped onto fleetops' connection, and their refusals with the place they
were written (lab hosts reached through them: tests/lab/engine/connection/test_sshargs.py)."""
from __future__ import annotations

import os
import textwrap

import pytest

from fleetops.engine.ansiblecfg import load_config
from fleetops.engine.connection import sshargs
from fleetops.engine.connection.transport import ConnParams
from fleetops.engine.inventory import load_inventory
from fleetops.errors import BadInput


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
