"""vars_prompt in a run that never stops to ask: -e answers, else the default; compared with
ansible-playbook run without a terminal. A prompt with neither is refused before the run (where
ansible-core, with no terminal, silently gives it no value)."""
from __future__ import annotations

import textwrap

import pytest

from fleetops.engine.inventory import load_inventory
from fleetops.engine.playbook import load_playbook
from fleetops.engine.validate import validate
from fleetops.errors import BadInput
from fleetops.extensions import registry
from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

PLAYBOOK = """
- hosts: h1
  gather_facts: false
  vars: {release: "0.9"}
  vars_prompt:
    - name: release
      prompt: Which release?
      default: "1.0"
    - name: who
      prompt: Your name
      private: false
  tasks:
    - name: show
      debug: {msg: "{{ release }} {{ who }}"}
"""
INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local}\n"


def _ansible(tmp_path, *extra) -> str:
    return oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY, None, *extra)["show"]["h1"]


@pytest.mark.parametrize("extra", [{"who": "me"}, {"who": "me", "release": "2.0"}])
def test_answers_from_e_and_defaults_as_ansible_playbook(tmp_path, extra):
    want = _ansible(tmp_path, *[a for k, v in extra.items() for a in ("-e", f"{k}={v}")])
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY, extra_vars=extra)
    assert outcome.exit_code == 0, rec.failures()
    assert rec.results("show")["h1"]["msg"] == want


@pytest.mark.parametrize("text, fragment, at", [
    (PLAYBOOK, "vars_prompt 'who' has no default and is not given with -e", "pb.yml:9:7"),
    ("- hosts: all\n  vars_prompt:\n    - name: pw\n      encrypt: sha512_crypt\n", "'encrypt' is not supported", "pb.yml:4:7"),
    ("- hosts: all\n  vars_prompt: [{prompt: x}]\n", "needs a 'name'", "pb.yml:2:17"),
    ("- hosts: all\n  vars_prompt: [{name: x, when: y}]\n", "unknown key 'when' in vars_prompt", "pb.yml:2:27"),
])
def test_refusals_name_the_prompt(tmp_path, text, fragment, at):
    (tmp_path / "inv.yml").write_text(INVENTORY)
    pb = tmp_path / "pb.yml"
    pb.write_text(textwrap.dedent(text))
    with pytest.raises(BadInput) as exc:
        validate(load_playbook(str(pb), registry().modules), load_inventory(str(tmp_path / "inv.yml")), {}, registry().modules)
    assert fragment in exc.value.msg and exc.value.where.endswith(at), (exc.value.msg, exc.value.where)
