"""Handlers that are includes and imports, against ansible-playbook on a local host: an
include_tasks handler (named, or by a `listen` topic; looped; its file a template) runs its
tasks, named or not, when notified; an import_tasks handler stands for its tasks, each notified by its own name, and the
import's own name notifies nothing; include_role / import_role as a handler is refused."""
from __future__ import annotations

import re

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops
from tests.support.playbook_run import messages, run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

FILES = {
    "named.yml": "- {name: first of named, debug: {msg: one}}\n- {name: second of named, debug: {msg: two}}\n",
    "nameless.yml": "- debug: {msg: \"nameless {{ topic_var }}\"}\n",
    "each.yml": "- {name: each, debug: {msg: \"each {{ item }}\"}}\n",
    "imported.yml": "- {name: imported a, debug: {msg: ia}}\n- {name: imported b, debug: {msg: ib}}\n",
    "roles/r/tasks/main.yml": "- {name: role task, debug: {msg: \"from the role\"}}\n",
}
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  vars: {topic_var: heard, which: nameless}
  tasks:
    - command: "true"
      notify: [reload, a topic, imported b, looped, templated]
  handlers:
    - name: reload
      include_tasks: named.yml
    - include_tasks: nameless.yml
      listen: a topic
    - name: an import
      import_tasks: imported.yml
    - name: never
      include_tasks: named.yml
    - name: looped
      include_tasks: each.yml
      loop: [1, 2]
    - name: templated
      include_tasks: "{{ which }}.yml"
"""


def test_include_and_import_handlers_run_as_ansible_core_runs_them(tmp_path):
    want = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, oracle.LOCAL_H1, FILES)
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=oracle.LOCAL_H1, files=FILES)
    assert outcome.exit_code == 0, rec.failures()
    includes = ("reload", "include_tasks", "looped", "templated")      # ansible-core's "included:" line
    assert messages(rec, keep=lambda t: t != "command" and t not in includes) == want
    shown = [r["msg"] for h, t, r in rec.results() if r.get("msg")]
    assert shown == ["one", "two", "nameless heard", "ib", "each 1", "each 2", "nameless heard"]
    assert want == {"first of named": {"h1": "one"}, "second of named": {"h1": "two"},
                    "debug": {"h1": "nameless heard"}, "imported b": {"h1": "ib"}, "each": {"h1": "each 2"},
                    }


def _refusals(tmp_path, pb: str):
    oracle.write_project(tmp_path, pb, oracle.LOCAL_H1, FILES)
    return oracle.run_project(tmp_path), fleetops("run", "pb.yml", "-i", "inv.yml", cwd=tmp_path)


def test_an_import_handlers_own_name_notifies_nothing_as_in_ansible_core(tmp_path):
    ans, p = _refusals(tmp_path, PLAYBOOK.replace("notify: [reload, a topic, imported b, looped, templated]", "notify: an import"))
    assert ans.returncode != 0 and "handler 'an import' was not found" in ans.stdout + ans.stderr, ans.stdout[-2000:]
    assert p.returncode == 4 and "pb.yml:7:" in p.stderr and "notify 'an import' matches no handler" in p.stderr, p.stderr


@pytest.mark.parametrize("kind", ["include_role", "import_role"])
def test_a_role_as_a_handler_is_refused_as_in_ansible_core(tmp_path, kind):
    ans, p = _refusals(tmp_path, PLAYBOOK + f"    - name: the role\n      {kind}: {{name: r}}\n")
    assert ans.returncode != 0 and f"Using '{kind}' as a handler is not supported" in ans.stdout + ans.stderr
    at = re.search(r"Origin: .*/pb\.yml:(\d+:\d+)", ans.stdout + ans.stderr).group(1)
    assert p.returncode == 4 and f"pb.yml:{at}: using '{kind}' as a handler is not supported" in p.stderr, p.stderr
