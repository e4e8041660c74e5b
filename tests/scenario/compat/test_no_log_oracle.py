"""`no_log` (task, block, play; true or a template per host), compared with ansible-playbook: the
result a no_log task shows is ansible-core's censored one (its outcome and the `censored` line,
each loop item too) in the live view, `--json` and the results store, while `register` keeps the
whole result for later tasks, as in ansible-core."""
from __future__ import annotations

import json
import re
import sqlite3
import textwrap

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

SECRET = "s3cr3t-Qx81"
INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"
PLAYBOOK = f"""
- hosts: h1
  gather_facts: false
  vars: {{hide: true}}
  tasks:
    - name: hidden
      command: echo {SECRET}
      no_log: true
      register: r
    - name: the register keeps it
      debug: {{msg: "{{{{ r.stdout }}}}"}}
    - name: hidden by a template
      command: echo {SECRET}-t
      no_log: "{{{{ hide }}}}"
    - name: a hidden loop
      command: echo {{{{ item }}}}
      loop: [{SECRET}-1, {SECRET}-2]
      no_log: true
    - name: a hidden failure
      command: sh -c 'echo {SECRET}-f; exit 3'
      no_log: true
      ignore_errors: true
    - name: shown
      command: echo visible
    - block:
        - name: hidden by its block
          command: echo {SECRET}-b
      no_log: true
"""
CENSORED = "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
NAMES = ["hidden", "hidden by a template", "a hidden loop", "a hidden failure", "hidden by its block"]


def _ansible_results(tmp_path) -> dict:
    d = tmp_path / "ansible"
    d.mkdir()
    (d / "inv.yml").write_text(INVENTORY)
    (d / "pb.yml").write_text(textwrap.dedent(PLAYBOOK))
    p = oracle.run("ansible-playbook", "-v", "-i", "inv.yml", "pb.yml", cwd=str(d),
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False"})
    assert p.returncode == 0, p.stdout[-2000:]
    out, task = {}, None
    for line in p.stdout.splitlines():
        m = re.match(r"^TASK \[(.*)\] \**$", line)
        if m:
            task = m.group(1)
        m = re.match(r"^(ok|changed|fatal): \[h1\](?:: FAILED!)? => (\(item=.*?\) => )?(\{.*\})$", line)
        if m and task:
            if m.group(2):           # a loop: one line per item, its label censored too
                assert m.group(2) == "(item=(censored due to no_log)) => "
                out.setdefault(task, {}).setdefault("results", []).append(json.loads(m.group(3)))
            else:
                out[task] = json.loads(m.group(3))
    return out


def test_no_log_shows_what_ansible_core_shows(tmp_path):
    want = _ansible_results(tmp_path)
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "pb.yml").write_text(textwrap.dedent(PLAYBOOK))
    p = fleetops("run", "pb.yml", "-i", "inv.yml", "--json", "--results", tmp_path / "runs", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count(SECRET) == 1          # only where the registered value is shown on purpose
    got = {t["name"]: t["results"]["h1"]["result"] for t in json.loads(p.stdout)["plays"][0]["tasks"]}
    for name in NAMES:
        mine = {k: v for k, v in got[name].items() if k in want[name]}
        if "results" in want[name]:
            mine["results"] = [{k: v for k, v in r.items() if k in w} for r, w in zip(mine["results"], want[name]["results"])]
        assert mine == want[name], (name, got[name], want[name])
        assert SECRET not in json.dumps(got[name])
    assert got["the register keeps it"]["msg"] == want["the register keeps it"]["msg"] == SECRET
    assert got["shown"]["stdout"] == "visible"
    stored = sqlite3.connect(str(tmp_path / "runs" / "runs.db"))
    rows = [str(row) for table, in stored.execute("SELECT name FROM sqlite_master WHERE type='table'")
            for row in stored.execute(f'SELECT * FROM "{table}"')]
    assert [r for r in rows if SECRET in r] == [r for r in rows if "the register keeps it" in r]
    assert any("visible" in r for r in rows) and any(CENSORED.split("'")[0] in r for r in rows)
    live = fleetops("run", "pb.yml", "-i", "inv.yml", "--results", tmp_path / "runs2", cwd=tmp_path)
    assert live.returncode == 0 and live.stdout.count(SECRET) == 1, live.stdout    # the debug line
