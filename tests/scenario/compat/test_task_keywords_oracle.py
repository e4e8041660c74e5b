"""Task keywords and debug's var, compared with ansible-playbook on the same playbook:
loop_control's index_var, extended (ansible_loop), pause and break_when, a float delay; `debug:
var=` shows an undefined name as not defined and fails on an expression whose filter fails; the
variables the template module gives a template about itself."""
from __future__ import annotations

import sys

import pytest

from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

PLAYBOOK = """
- hosts: h1
  gather_facts: false
  tasks:
    - debug: {msg: "{{ idx }}:{{ ansible_loop.index }}/{{ ansible_loop.revindex0 }} {{ ansible_loop.first }} {{ ansible_loop.last }} {{ ansible_loop.previtem | default('-') }} {{ ansible_loop.nextitem | default('-') }}"}
      loop: [a, b, c]
      loop_control: {index_var: idx, extended: true, pause: 0}
      register: r_ext
    - {name: extended, debug: {msg: "{{ r_ext.results | map(attribute='msg') | join(';') }} {{ r_ext.results | map(attribute='idx') | join(',') }}"}}
    - debug: {msg: "{{ item }}"}
      loop: [1, 2, 3, 4]
      loop_control: {break_when: ["item >= 2"]}
      register: r_break
    - {name: broken, debug: {msg: "{{ r_break.results | map(attribute='item') | join(',') }}"}}
    - command: "true"
      register: r_until
      until: r_until.rc == 0
      delay: 0.01
    - {name: until_float_delay, debug: {msg: "attempts {{ r_until.attempts }}"}}
    - {debug: {var: "nope_undefined"}, register: r1, ignore_errors: true}
    - {debug: {var: "'http://h/x' | urlsplit('bad_part')"}, register: r2, ignore_errors: true}
    - {name: debug_var, debug: {msg: "{{ r1 is failed }} {{ r2 is failed }}"}}
    - {template: {src: t.j2, dest: "{{ playbook_dir }}/t.out"}}
    - {name: template_vars, debug: {msg: "{{ lookup('file', playbook_dir + '/t.out') }}"}}
"""
FILES = {"templates/t.j2": "{{ ansible_managed }} {{ template_uid }} {{ template_fullpath | basename }} "
                           "{{ template_destpath | basename }} {{ template_mtime.year > 2000 }} "
                           "{{ template_run_date.year > 2000 }}\n"}
INVENTORY = f"all:\n  hosts:\n    h1: {{ansible_connection: local, ansible_python_interpreter: {sys.executable}}}\n"
TASKS = ("extended", "broken", "until_float_delay", "debug_var", "template_vars")


def test_loop_control_delay_and_debug_var_as_ansible_playbook(tmp_path):
    want = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY, FILES)
    outcome, rec = run_yaml(tmp_path, PLAYBOOK, inventory=INVENTORY, files=FILES)
    assert outcome.exit_code == 0, rec.failures()
    assert {t: rec.results(t)["h1"]["msg"] for t in TASKS} == {t: want[t]["h1"] for t in TASKS}
