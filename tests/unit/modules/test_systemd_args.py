"""`systemd`, `systemd_service` and `service` arguments refused before any host is contacted, with
ansible-core's rules: a name for state/enabled/masked, an alias never beside its own name."""
from __future__ import annotations

import textwrap

import pytest

from fleetops.engine.inventory import load_inventory
from fleetops.engine.lint import check_playbook
from fleetops.engine.playbook import load_playbook
from fleetops.engine.validate import validate
from fleetops.errors import BadInput
from fleetops.extensions import registry


def _check(tmp_path, task: str):
    (tmp_path / "inv.ini").write_text("h1 ansible_connection=local\n")
    (tmp_path / "site.yml").write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                                       + textwrap.indent(textwrap.dedent(task), "    "))
    book = load_playbook(str(tmp_path / "site.yml"), registry().modules)
    validate(book, load_inventory(str(tmp_path / "inv.ini")), {}, registry().modules)
    check_playbook(book, registry().modules)        # as the CLI does, after validate


@pytest.mark.parametrize("task, msg", [
    ("- ansible.builtin.systemd_service:\n    state: started\n", "'state' needs 'name'"),
    ("- systemd:\n    name: a\n    unit: b\n    state: started\n", "'name' and 'unit' are the same argument"),
    ("- systemd:\n    daemon_reload: true\n    daemon-reload: true\n", "are the same argument"),
    ("- systemd:\n    name: cron\n    state: running\n", "state"),
    ("- service:\n    state: started\n", "name"),
    ("- service:\n    name: cron\n    state: started\n    use: sysvinit\n", "use"),
])
def test_refused_before_any_host(tmp_path, task, msg):
    with pytest.raises(BadInput) as exc:
        _check(tmp_path, task)
    assert msg in str(exc.value)


@pytest.mark.parametrize("task", [
    "- systemd:\n    name: cron\n",          # reads the unit's status only, as in ansible-core
    "- service:\n    name: cron\n",          # handed to systemd as it is, as ansible-core does there
    "- systemd:\n    daemon_reload: true\n",
    "- ansible.builtin.systemd:\n    service: cron\n    state: started\n    enabled: true\n",
    "- systemd_service:\n    name: cron\n    masked: false\n    scope: user\n",
    "- ansible.builtin.service:\n    name: cron\n    state: restarted\n    sleep: 2\n",
])
def test_accepted(tmp_path, task):
    _check(tmp_path, task)
