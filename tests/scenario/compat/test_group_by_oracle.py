"""group_by: groups made while the playbook runs, compared with ansible-playbook itself.

Both run the same playbook over the same local-connection hosts; which hosts each later task
runs on (by the groups group_by made, their parents, `group_names` and group_vars/ of a new
group) must agree.
"""
from __future__ import annotations

import textwrap

import pytest

from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = """
all:
  vars: {ansible_connection: local}
  children:
    web:
      hosts:
        h1: {tier: front}
        h2: {tier: back}
    db:
      hosts:
        h3: {tier: back end}
"""
PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: by tier
      group_by: {key: "tier_{{ tier }}", parents: [tiers]}
    - name: web only again
      group_by: {key: webish}
      when: "'web' in group_names"
- hosts: tier_back
  gather_facts: false
  tasks:
    - name: back
      debug: {msg: "{{ group_names | join(',') }}"}
- hosts: tiers:!tier_front
  gather_facts: false
  tasks:
    - name: parents
      debug: {msg: "{{ colour }}"}
- hosts: webish
  gather_facts: false
  tasks:
    - name: webish
      debug: {msg: "{{ groups['webish'] | join(',') }}"}
- hosts: "tier_back-end"
  gather_facts: false
  tasks:
    - name: spaces become dashes
      debug: {msg: "{{ inventory_hostname }}"}
"""
GROUP_VARS = {"group_vars/tiers.yml": "colour: blue\n"}


def _ansible(tmp_path) -> dict:
    return oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY, GROUP_VARS)


def test_group_by_as_ansible_playbook(tmp_path):
    want = _ansible(tmp_path)
    (tmp_path / "inventory.yml").write_text(textwrap.dedent(INVENTORY))
    for rel, text in GROUP_VARS.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY)
    assert outcome.exit_code == 0, rec.failures()
    got = {}
    for task in ("back", "parents", "webish", "spaces become dashes"):
        got[task] = {h: r["msg"] for h, r in rec.results(task).items()}
    # a group's members are listed in the order the hosts' group_by results came back, on
    # either side (ansible-core's strategy adds them as its workers finish): the same members
    for side in (got, want):
        side["webish"] = {h: sorted(m.split(",")) for h, m in side["webish"].items()}
    assert got == want
    assert want["back"] and want["parents"] and want["webish"]          # each play ran somewhere


def test_a_pattern_matching_nothing_is_still_refused_without_a_group_by_before_it(tmp_path):
    from fleetops.engine.inventory import load_inventory
    from fleetops.engine.playbook import load_playbook
    from fleetops.engine.validate import validate
    from fleetops.errors import BadInput
    from fleetops.extensions import registry
    (tmp_path / "inventory.yml").write_text(textwrap.dedent(INVENTORY))
    pb = tmp_path / "pb.yml"
    pb.write_text("- hosts: tier_back\n  tasks: [{debug: {msg: x}}]\n"
                  "- hosts: all\n  tasks: [{group_by: {key: tier_back}}]\n")
    with pytest.raises(BadInput) as exc:
        validate(load_playbook(str(pb), registry().modules), load_inventory(str(tmp_path / "inventory.yml")), {},
                 registry().modules)
    assert "matches no host" in exc.value.msg and exc.value.where.endswith("pb.yml:1:3")
