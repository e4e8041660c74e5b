"""Connection inputs (private keys) are checked before any host is contacted."""
import os
import subprocess

import pytest

from fleetops.engine.inventory import load_inventory
from fleetops.engine.validate import check_connections
from fleetops.errors import BadInput


def _key(tmp_path, mode):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    os.chmod(key, mode)
    return key


def _inventory(tmp_path, key):
    inv = tmp_path / "hosts.yml"
    inv.write_text(
        "all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: 1\n"
        f"      ansible_ssh_private_key_file: {key}\n"
    )
    return load_inventory(str(inv))


def test_key_readable_by_others_is_bad_input(tmp_path):
    inv = _inventory(tmp_path, _key(tmp_path, 0o644))
    with pytest.raises(BadInput) as err:
        check_connections(inv, ["h1"])
    assert "host h1" in str(err.value) and "0644" in str(err.value)


def test_missing_key_is_bad_input(tmp_path):
    inv = _inventory(tmp_path, tmp_path / "nope")
    with pytest.raises(BadInput) as err:
        check_connections(inv, ["h1"])
    assert "host h1" in str(err.value)


def test_good_key_passes(tmp_path):
    check_connections(_inventory(tmp_path, _key(tmp_path, 0o600)), ["h1"])
