"""Dynamic includes run on the lab hosts by ansible-core 2.19 and by fleetops: a loop over
include_tasks / include_role (`loop`, `with_items`, `loop_control: loop_var`), and a file or role
name that is a template of host variables, resolved per host when reached. Per task and host
the outcome (the include's own `included` results too), the messages the included tasks print
(the item, what a host-chosen file registered) and the recap must agree."""
from __future__ import annotations

import os

import pytest

from tests.support import lab_parity, oracle

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh")]

LOOPS = {
    "site.yml": """
        - name: loops over includes
          hosts: lab[0:2]
          gather_facts: false
          vars:
            pkgs: [alpha, beta]
          tasks:
            - name: a task file per item
              include_tasks: per_item.yml
              loop: "{{ pkgs }}"
              loop_control:
                loop_var: pkg
            - name: with_items over a role
              include_role:
                name: greeter
              with_items: [one, two]
            - name: an item that skips on one host
              include_tasks: per_item.yml
              loop: [gamma]
              loop_control:
                loop_var: pkg
              when: inventory_hostname != groups['lab'][0]
            - name: what the items left behind
              debug:
                msg: "{{ seen | default([]) | join(',') }}"
    """,
    "per_item.yml": """
        - name: item inside the file
          debug:
            msg: "{{ pkg }} on {{ inventory_hostname }}"
        - name: remember it
          set_fact:
            seen: "{{ (seen | default([])) + [pkg] }}"
        - name: a changed task per item
          command: "echo {{ pkg }}"
          register: echoed
        - name: registered per item
          debug:
            msg: "{{ echoed.stdout }}"
    """,
    "roles/greeter/tasks/main.yml": """
        - name: greet
          debug:
            msg: "hello {{ item }} from {{ role_name | default('greeter') }}"
    """,
}

TEMPLATED = {
    "site.yml": """
        - name: names chosen per host
          hosts: lab[0:2]
          gather_facts: false
          vars:
            entry: other
          tasks:
            - name: the host's own file
              include_tasks: "{{ flavour }}.yml"
            - name: the host's own role
              include_role:
                name: "{{ role_for_host }}"
            - name: a role's entry point from a variable
              include_role:
                name: greeter
                tasks_from: "{{ entry }}"
            - name: what the chosen file registered
              debug:
                msg: "{{ flavour_out.stdout | default('nothing') }}"
    """,
    "sweet.yml": """
        - name: sweet task
          command: echo sweet
          register: flavour_out
    """,
    "sour.yml": """
        - name: sour task
          debug:
            msg: sour
    """,
    "roles/greeter/tasks/main.yml": """
        - name: greet
          debug:
            msg: "hello from main"
    """,
    "roles/greeter/tasks/other.yml": """
        - name: other entry
          debug:
            msg: "hello from other"
    """,
    "roles/waver/tasks/main.yml": """
        - name: wave
          debug:
            msg: "waving at {{ inventory_hostname }}"
    """,
}


def _both(lab, tmp_path, files, host_vars=None):
    results = {}
    for who in ("ansible", "fleetops"):
        d = lab_parity.write_project(tmp_path / who, files)
        inv = lab_parity.lab_inventory(lab, os.path.join(d, "inv.yml"), host_vars)
        pb = os.path.join(d, "site.yml")
        results[who] = (lab_parity.ansible_results(pb, inv, lab.known_hosts_path) if who == "ansible"
                        else lab_parity.fleetops_results(pb, inv))
    return results


def test_loops_over_includes_as_ansible_core(lab_clean, tmp_path):
    got = _both(lab_clean, tmp_path, LOOPS)
    assert got["fleetops"] == got["ansible"]
    names = [h["name"] for h in lab_clean.hosts[:3]]
    want = got["ansible"]
    assert want[("a task file per item", names[0])] == [("ok", None), ("ok", None)]
    assert [m for _, m in want[("item inside the file", names[1])]] == [f"{p} on {names[1]}" for p in
                                                                        ("alpha", "beta", "gamma")]
    assert want[("what the items left behind", names[0])] == [("ok", "alpha,beta")]


def test_templated_include_names_as_ansible_core(lab_clean, tmp_path):
    names = [h["name"] for h in lab_clean.hosts[:3]]
    # tasks_from from a play variable: ansible-core 2.19 merges include_role results by their
    # unrendered arguments, so a per-host tasks_from gives every host the first host's (README)
    host_vars = {names[0]: {"flavour": "sweet", "role_for_host": "greeter"},
                 names[1]: {"flavour": "sour", "role_for_host": "waver"},
                 names[2]: {"flavour": "sweet", "role_for_host": "waver"}}
    got = _both(lab_clean, tmp_path, TEMPLATED, host_vars)
    assert got["fleetops"] == got["ansible"]
    want = got["ansible"]
    assert want[("what the chosen file registered", names[0])] == [("ok", "sweet")]
    assert want[("what the chosen file registered", names[1])] == [("ok", "nothing")]
    assert want[("waver : wave", names[1])] == [("ok", f"waving at {names[1]}")]
