"""~/.ssh/config lookups and how they combine with inventory variables (real files, real paramiko)."""
from __future__ import annotations

import os
import textwrap

import pytest

from fleetops.engine.connection import sshconfig
from fleetops.engine.inventory import load_inventory
from fleetops.errors import BadInput
from tests.support.paths import REPO

CONFIG = """\
    Host fleet-eu1 eu1
        HostName 10.20.0.11
        User hermes
        Port 2201
        IdentityFile ~/.ssh/id_fleet
        IdentityFile ~/.ssh/id_second
        ProxyJump jump@bastion.example.com:2222

    Host web*
        User webops

    Host *
        Port 2299
"""


@pytest.fixture
def config_path(tmp_path):
    path = tmp_path / "ssh_config"
    path.write_text(textwrap.dedent(CONFIG))
    return str(path)


def test_alias_resolves_every_field(config_path):
    found = sshconfig.lookup("eu1", config_path)
    assert found == sshconfig.SshHostConfig(
        hostname="10.20.0.11", user="hermes", port=2201,
        identity_file=os.path.expanduser("~/.ssh/id_fleet"),
        proxy_jump="jump@bastion.example.com:2222")


def test_wildcards_and_first_match_wins(config_path):
    found = sshconfig.lookup("web7", config_path)
    assert (found.hostname, found.user, found.port, found.identity_file) == (None, "webops", 2299, None)
    assert sshconfig.lookup("fleet-eu1", config_path).port == 2201   # its own Port came first


def test_missing_config_is_empty(tmp_path):
    assert sshconfig.lookup("eu1", str(tmp_path / "absent")) == sshconfig.SshHostConfig()


def test_unreadable_config_is_bad_input(tmp_path):
    with pytest.raises(BadInput) as err:
        sshconfig.lookup("eu1", str(tmp_path))            # a directory cannot be read as a file
    assert err.value.where == str(tmp_path)
    assert err.value.msg == "cannot read ssh config: Is a directory"
    binary = tmp_path / "binary_config"
    binary.write_bytes(b"Host a\n  User \xff\n")
    with pytest.raises(BadInput, match="cannot read ssh config"):
        sshconfig.lookup("a", str(binary))


def test_unparsable_config_and_bad_port(tmp_path):
    path = tmp_path / "config"
    path.write_text("Host a\n  HostName\n")
    with pytest.raises(BadInput) as err:
        sshconfig.lookup("a", str(path))
    assert (err.value.where, err.value.msg) == (str(path), "cannot parse ssh config: Unparsable line HostName")
    path.write_text("Host a\n  Port ssh\n")
    with pytest.raises(BadInput) as err:
        sshconfig.lookup("a", str(path))
    assert err.value.msg == "ssh config: Port for 'a' is not a number: 'ssh'"


def inventory(tmp_path, text):
    path = tmp_path / "hosts.yml"
    path.write_text(textwrap.dedent(text))
    return load_inventory(str(path))


def test_inventory_name_is_looked_up_in_ssh_config(tmp_path, config_path):
    inv = inventory(tmp_path, "all:\n  hosts:\n    eu1:\n")
    p = inv.connection_params("eu1", ssh_config_path=config_path)
    assert (p.name, p.address, p.user, p.port, p.proxy_jump) == \
           ("eu1", "10.20.0.11", "hermes", 2201, "jump@bastion.example.com:2222")
    assert p.key_file == os.path.expanduser("~/.ssh/id_fleet")


def test_ansible_host_is_the_lookup_key(tmp_path, config_path):
    inv = inventory(tmp_path, """\
        all:
          hosts:
            hermes-a: {ansible_host: fleet-eu1}
            hermes-b: {ansible_host: 192.0.2.7}
    """)
    a = inv.connection_params("hermes-a", ssh_config_path=config_path)
    assert (a.name, a.address, a.user, a.port) == ("hermes-a", "10.20.0.11", "hermes", 2201)
    b = inv.connection_params("hermes-b", ssh_config_path=config_path)
    assert (b.address, b.user, b.port, b.proxy_jump) == ("192.0.2.7", None, 2299, None)


def test_inventory_variables_win_over_ssh_config(tmp_path, config_path):
    inv = inventory(tmp_path, """\
        all:
          hosts:
            eu1:
              ansible_user: root
              ansible_port: 22
              ansible_ssh_private_key_file: /keys/inventory_key
              fleetops_proxy_jump: other-jump
    """)
    p = inv.connection_params("eu1", ssh_config_path=config_path)
    assert (p.address, p.user, p.port, p.key_file, p.proxy_jump) == \
           ("10.20.0.11", "root", 22, "/keys/inventory_key", "other-jump")


def test_default_path_is_home_ssh_config(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text("Host eu1\n  HostName 10.20.0.99\n  User fromhome\n")
    monkeypatch.setenv("HOME", str(home))
    inv = inventory(tmp_path, "all:\n  hosts:\n    eu1:\n")
    p = inv.connection_params("eu1")
    assert (p.address, p.user, p.port) == ("10.20.0.99", "fromhome", 22)


def test_match_exec_still_works_though_invoke_is_kept_out_of_paramikos_import(tmp_path):
    """engine/__init__ stops paramiko importing invoke (start-up time); a config that uses
    `Match exec` loads it on demand, or says plainly that it is missing."""
    import importlib.util
    import subprocess
    import sys
    cfg = tmp_path / "config"
    cfg.write_text('Host a\n  HostName b\nMatch exec "true"\n  User zz\n')
    code = ("import sys; import fleetops.engine.connection.sshconfig as sc; "
            "assert 'invoke' not in sys.modules or sys.modules['invoke'] is not None; "
            "before = 'invoke' in sys.modules; "
            f"print(before, sc.lookup('a', {str(cfg)!r}).user)")
    if importlib.util.find_spec("invoke") is None:
        with pytest.raises(BadInput, match="invoke"):
            sshconfig.lookup("a", str(cfg))
        return
    root = str(REPO)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=root, env=dict(os.environ, PYTHONPATH=root)).stdout
    assert out.split() == ["False", "zz"]     # not imported up front, used when needed
