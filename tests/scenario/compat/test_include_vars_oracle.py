"""include_vars compared with ansible-playbook on the same files: a file named by a template of
the host's variables, found in the role's vars/ and the playbook's vars/, `name:`, `dir:`, values
that stay templates until used, its precedence over play and task vars, and a directory's
`depth`, `files_matching`, `ignore_files`, `ignore_unknown_extensions` and `hash_behaviour: merge`."""
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

FILES = {
    "vars/Debian.yml": "pkg: apt-thing\nurl: \"http://{{ web_host }}/x\"\n",
    "vars/RedHat.yml": "pkg: rpm-thing\n",
    "vars/extra/a.yml": "from_dir_a: 1\nshared: a\n",
    "vars/extra/b.yaml": "shared: b\n",
    "roles/r/vars/inner.yml": "inner: from_role_vars\n",
    "vars/deep/a.yml": "a: 1\n",
    "vars/deep/ignored.yml": "ignored: 1\n",
    "vars/deep/sub/b.yml": "b: 1\n",
    "vars/deep/sub/deeper/c.json": "{\"c\": 1}\n",
    "vars/deep/notes.txt": "not: vars\n",
    "vars/conf1.yml": "conf: {a: 1, inner: {x: 1}}\n",
    "vars/conf2.yml": "conf: {b: 2, inner: {y: 2}}\n",
    "roles/r/tasks/main.yml": ("- include_vars: inner.yml\n"
                               "- {name: in_role, debug: {msg: \"{{ inner }}\"}}\n"),
}
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  vars: {family: Debian, web_host: example.org, pkg: from_play}
  tasks:
    - include_vars: "{{ family }}.yml"
    - {name: by_family, debug: {msg: "{{ pkg }} {{ url }}"}}
    - {name: task_vars_lose, debug: {msg: "{{ pkg }}"}, vars: {pkg: from_task}}
    - include_vars: {dir: vars/extra, name: bundle}
    - {name: named_dir, debug: {msg: "{{ bundle.from_dir_a }} {{ bundle.shared }}"}}
    - include_role: {name: r}
    - {name: after_role, debug: {msg: "{{ inner }}"}}
    - include_vars: {dir: vars/deep, depth: 2, name: d2, ignore_unknown_extensions: true}
    - {name: depth, debug: {msg: "{{ d2.keys() | sort | join(',') }}"}}
    - include_vars: {dir: vars/deep, files_matching: '^[ab]', name: dm}
    - {name: matching, debug: {msg: "{{ dm.keys() | sort | join(',') }}"}}
    - include_vars: {dir: vars/deep, ignore_files: ['ignored.yml', '.*[.]txt'], name: di}
    - {name: ignoring, debug: {msg: "{{ di.keys() | sort | join(',') }}"}}
    - include_vars: conf1.yml
    - include_vars: {file: conf2.yml, hash_behaviour: merge}
    - {name: merged, debug: {msg: "{{ conf.a }} {{ conf.b }} {{ conf.inner.x }} {{ conf.inner.y }}"}}
"""
INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local}\n"
TASKS = ("by_family", "task_vars_lose", "named_dir", "in_role", "after_role", "depth", "matching", "ignoring",
         "merged")


def _ansible(tmp_path) -> dict:
    got = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY, FILES)
    return {t: by_host["h1"] for t, by_host in got.items()}


def test_include_vars_as_ansible_playbook(tmp_path):
    want = _ansible(tmp_path)
    (tmp_path / "inv.yml").write_text(INVENTORY)
    pb = tmp_path / "pb" / "site.yml"
    pb.parent.mkdir()
    pb.write_text(textwrap.dedent(PLAYBOOK))
    for rel, text in FILES.items():
        (pb.parent / rel).parent.mkdir(parents=True, exist_ok=True)
        (pb.parent / rel).write_text(text)
    validate(load_playbook(str(pb), registry().modules), load_inventory(str(tmp_path / "inv.yml")), {}, registry().modules)
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY, files=FILES)
    assert outcome.exit_code == 0, rec.failures()
    got = {}
    for t in TASKS:
        found = rec.results(t) or rec.results("r : " + t)
        got[t] = found["h1"]["msg"]
    assert got == {t: want[t] for t in TASKS}
    assert (want["depth"], want["matching"], want["ignoring"]) == ("a,b,ignored", "a,b", "a,b,c")  # the cases differ


def test_a_missing_file_fails_the_task_and_a_variable_no_file_defines_is_refused(tmp_path):
    outcome, rec = run_yaml(tmp_path, """
        - hosts: h1
          gather_facts: false
          tasks:
            - {name: missing, include_vars: nothere.yml}
    """)
    assert outcome.exit_code != 0 and "Could not find or access 'nothere.yml'" in rec.results("missing")["h1"]["msg"]
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "vars").mkdir()
    (tmp_path / "vars" / "a.yml").write_text("a: 1\n")
    pb = tmp_path / "pb.yml"
    pb.write_text("- hosts: h1\n  tasks:\n    - include_vars: a.yml\n    - debug: {msg: '{{ a }} {{ b }}'}\n")
    with pytest.raises(BadInput) as exc:
        validate(load_playbook(str(pb), registry().modules), load_inventory(str(tmp_path / "inv.yml")), {}, registry().modules)
    assert "'b'" in exc.value.msg and "'a'" not in exc.value.msg
