"""Connection inputs (private keys) are checked before any host is contacted."""
import os
import subprocess

import pytest

from fleetops.engine.inventory import load_inventory
from fleetops.engine.validate import check_connections
from fleetops.errors import BadInput
from tests.support.paths import DATA


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


ORDER_INVENTORY = os.path.join(DATA, "ansible", "inventories",
                               "ansible--test--integration--targets--order--inventory", "inventory")


def test_templated_interpreter_of_a_real_inventory_renders_per_host():
    """ansible-core's own tests inventory: ansible_python_interpreter='{{ansible_playbook_python}}'."""
    inv = load_inventory(ORDER_INVENTORY)
    check_connections(inv, ["hostA"])               # accepted, not refused as a template
    from fleetops.engine.templating import Templar
    env = inv.template_vars("hostA")
    params = inv.connection_params("hostA", render=lambda v: Templar().render(v, env))
    assert params.python == __import__("sys").executable and params.connection == "local"


def test_templated_address_from_an_inventory_variable_and_undefined_one(tmp_path):
    inv_path = tmp_path / "hosts.yml"
    inv_path.write_text("all:\n  hosts:\n    h1:\n      ip: 10.0.0.7\n      ansible_host: '{{ ip }}'\n"
                        "    h2:\n      ansible_host: '{{ nowhere }}'\n")
    inv = load_inventory(str(inv_path))
    check_connections(inv, ["h1"])
    with pytest.raises(BadInput) as err:
        check_connections(inv, ["h2"])
    assert "connection variable 'ansible_host'" in err.value.msg and "nowhere" in err.value.msg
    assert err.value.where == f"{inv_path}:7:7"
    check_connections(inv, ["h2"], extra_vars={"nowhere": "10.0.0.8"})   # -e can supply it


def test_extra_vars_change_where_fleetops_connects(tmp_path):
    key = _key(tmp_path, 0o600)
    inv = _inventory(tmp_path, tmp_path / "missing_key")
    with pytest.raises(BadInput):
        check_connections(inv, ["h1"])              # the inventory's key file does not exist
    extra = {"ansible_host": "192.0.2.9", "ansible_port": "2222", "ansible_user": "ops",
             "ansible_ssh_private_key_file": str(key)}
    check_connections(inv, ["h1"], extra_vars=extra)
    p = inv.connection_params("h1", extra_vars=extra)
    assert (p.address, p.port, p.user, p.key_file) == ("192.0.2.9", 2222, "ops", str(key))


def test_a_connection_plugin_fleetops_lacks_is_bad_input_at_its_line(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text("[web]\nh1 ansible_connection=docker\nh2 ansible_connection=ansible.builtin.local\n")
    loaded = load_inventory(str(inv))
    with pytest.raises(BadInput) as err:
        check_connections(loaded, ["h1"])
    assert "'ansible_connection'" in err.value.msg and "docker" in err.value.msg
    assert ":2:" in err.value.where
    check_connections(loaded, ["h2"])
    assert loaded.connection_params("h2").connection == "local"


def test_the_connection_keyword_applies_where_no_variable_says(tmp_path):
    inv = tmp_path / "hosts.ini"
    inv.write_text("[web]\nh1\nh2 ansible_connection=ssh\n")
    loaded = load_inventory(str(inv))
    assert loaded.connection_params("h1", connection="local").connection == "local"
    assert loaded.connection_params("h2", connection="local").connection == "ssh"
    assert loaded.connection_params("h1").connection == "ssh"
