"""An unknown filter, test or lookup, anywhere a template or a bare condition can hold one,
against ansible-playbook on a local host: ansible-core runs the tasks before it and fails on
reaching it; fleetops refuses the playbook with one file:line line, exit 4, before any host is
contacted (the first task, which leaves a marker file, never runs), and under --list-tasks too."""
from __future__ import annotations

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = oracle.LOCAL_H1
HEAD = """- hosts: h1
  gather_facts: false
  tasks:
    - command: touch {marker}
    - name: bad
"""
# (task body under `- name: bad` (from line 6), the unknown name, the line fleetops names)
CASES = {
    "filter in args": ("      debug: {msg: \"{{ ['a', 'b'] | fo_no_such_filter }}\"}\n", "fo_no_such_filter", 6),
    "filter in a block tag": ("      debug:\n        msg: \"{% for x in [1] | fo_no_such_filter %}{{ x }}{% endfor %}\"\n",
                              "fo_no_such_filter", 7),
    "filter in when": ("      debug: {msg: hi}\n      when: \"[1] | fo_no_such_filter([2])\"\n", "fo_no_such_filter", 7),
    "test in when": ("      debug: {msg: hi}\n      when: 1 is fo_no_such_test\n", "fo_no_such_test", 7),
    "filter in assert that": ("      assert:\n        that:\n          - 1 == 1\n          - \"3 | fo_no_such_filter > 1\"\n",
                              "fo_no_such_filter", 7),
    "test in assert that": ("      assert: {that: 1 is fo_no_such_test}\n", "fo_no_such_test", 6),
    "lookup in args": ("      debug: {msg: \"{{ lookup('fo_no_such_lookup', 'x') }}\"}\n", "fo_no_such_lookup", 6),
    "query in when": ("      debug: {msg: hi}\n      when: query('fo_no_such_lookup', 'x') | length > 0\n",
                      "fo_no_such_lookup", 7),
}


def _project(tmp_path, body: str):
    marker = tmp_path / "contacted"
    oracle.write_project(tmp_path, HEAD.format(marker=marker) + body, INVENTORY)
    return marker


@pytest.mark.parametrize("case", sorted(CASES))
def test_unknown_name_refused_before_any_host_where_ansible_core_fails_on_it(tmp_path, case):
    body, name, line = CASES[case]
    marker = _project(tmp_path, body)
    ans = oracle.run_project(tmp_path)
    assert ans.returncode != 0 and name in ans.stdout + ans.stderr, ans.stdout[-2000:]
    assert marker.exists(), "ansible-core ran the task before the unknown name"
    marker.unlink()
    for extra in ((), ("--list-tasks",)):
        p = fleetops("run", "pb.yml", "-i", "inv.yml", *extra, cwd=tmp_path)
        assert p.returncode == 4, (extra, p.stdout[-2000:], p.stderr[-2000:])
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"fleetops: error: pb.yml:{line}:"), lines
        assert f"'{name}'" in lines[0] and "Traceback" not in p.stderr, lines
        assert not marker.exists()


@pytest.mark.parametrize("where", ["roles/r/defaults/main.yml", "group_vars/all.yml"])
def test_unknown_name_in_a_variable_file_is_refused_at_its_line(tmp_path, where):
    """A role default or an inventory variable whose template names an unknown filter: ansible-core
    fails when a task uses it; fleetops refuses it at the variable's own line before the run."""
    marker = tmp_path / "contacted"
    files = {"roles/r/tasks/main.yml": "- debug: {msg: \"{{ v }}\"}\n", where: "ok: 1\nv: \"{{ 1 | fo_no_such_filter }}\"\n"}
    oracle.write_project(tmp_path, HEAD.format(marker=marker) + "      include_role: {name: r}\n", INVENTORY, files)
    ans = oracle.run_project(tmp_path)
    assert ans.returncode != 0 and "fo_no_such_filter" in ans.stdout + ans.stderr and marker.exists()
    marker.unlink()
    p = fleetops("run", "pb.yml", "-i", "inv.yml", cwd=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 4 and len(lines) == 1 and f"{where}:2:1: " in lines[0], p.stderr
    assert "variable 'v'" in lines[0] and "unknown filter 'fo_no_such_filter'" in lines[0] and not marker.exists()
