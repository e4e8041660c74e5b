"""ansible.cfg: found and read as ansible-core does (`ansible-config dump` is the oracle)."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

from fleetops.engine.ansiblecfg import load_config
from fleetops.engine.connection.transport import ConnDefaults
from fleetops.engine.inventory import load_inventory
from tests.support import oracle
from tests.support.paths import DATA

TRELLIS = os.path.join(DATA, "ansible", "playbooks", "trellis")
SETTINGS = {"DEFAULT_HOST_LIST": "inventory", "DEFAULT_ROLES_PATH": "roles_path", "DEFAULT_REMOTE_USER": "remote_user",
            "DEFAULT_PRIVATE_KEY_FILE": "private_key_file", "DEFAULT_FORKS": "forks",
            "HOST_KEY_CHECKING": "host_key_checking", "DEFAULT_TIMEOUT": "timeout"}


def _dump(cfg_path: str) -> dict:
    p = oracle.run("ansible-config", "dump", "--only-changed", env={"ANSIBLE_CONFIG": cfg_path})
    out = {}
    for line in re.sub(r"\x1b\[[0-9;]*m", "", p.stdout).splitlines():
        m = re.match(r"^(\w+)\(.*\) = (.*)$", line)
        if m and m.group(1) in SETTINGS:
            value = m.group(2)
            try:
                value = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                pass
            out[SETTINGS[m.group(1)]] = value
    return out


@pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh")
@pytest.mark.parametrize("which", ["trellis", "own"])
def test_settings_as_ansible_config_dump(which, tmp_path):
    if which == "trellis":
        path = os.path.abspath(os.path.join(TRELLIS, "ansible.cfg"))
    else:
        path = str(tmp_path / "ansible.cfg")
        (tmp_path / "ansible.cfg").write_text(
            "[defaults]\ninventory = inv/hosts.ini\nremote_user = deploy ; the login\nprivate_key_file = ~/.ssh/k\n"
            "forks = 7\nhost_key_checking = False\ntimeout = 25\nroles_path = r1:r2\n")
    want = _dump(path)
    cfg = load_config(path, env={})
    got = {k: getattr(cfg, k) for k in SETTINGS.values() if getattr(cfg, k) not in (None, [])}
    assert got == want and got


def test_cli_takes_inventory_and_connection_defaults_from_ansible_cfg(tmp_path):
    """`fleetops run` with no -i, in a directory holding ansible.cfg, as `ansible-playbook` would."""
    (tmp_path / "hosts.ini").write_text("[web]\nw1 ansible_host=192.0.2.1\nw2 ansible_user=own\n")
    (tmp_path / "ansible.cfg").write_text("[defaults]\ninventory = hosts.ini\nremote_user = deploy\ntimeout = 25\n")
    (tmp_path / "site.yml").write_text("- hosts: web\n  gather_facts: false\n  tasks:\n    - ping:\n")
    os.chmod(tmp_path, 0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    p = subprocess.run([os.path.join(os.path.dirname(sys.executable), "fleetops"), "run", "site.yml", "--list-hosts"], cwd=tmp_path,
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "hosts (2):" in p.stdout and "w1" in p.stdout
    cfg = load_config(env={}, cwd=str(tmp_path))
    inv = load_inventory(cfg.inventory[0], ConnDefaults(remote_user=cfg.remote_user, timeout=cfg.timeout))
    a, b = inv.connection_params("w1"), inv.connection_params("w2")
    assert (a.user, a.connect_timeout, b.user) == ("deploy", 25.0, "own")   # a host variable wins
