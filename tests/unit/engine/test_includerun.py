"""Dynamic includes at run time (engine/includerun.py) on local hosts: the per-host choice, the
item bound into the included tasks, and the failures that stay with the host that met them."""
from __future__ import annotations


def test_a_bad_file_chosen_at_run_time_fails_only_the_hosts_that_include_it(run):
    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          tasks:
            - name: pick
              include_tasks: "{{ 'bad' if inventory_hostname == 'h1' else 'good' }}.yml"
            - name: after
              debug: {msg: "still here"}
    """, files={"good.yml": "- debug: {msg: good}\n", "bad.yml": "- nosuchmodule: {}\n"})
    picked = rec.results("pick")
    assert picked["h1"]["failed"] and "bad.yml:1:3: unknown module 'nosuchmodule'" in picked["h1"]["msg"]
    assert set(rec.results("after")) == {"h2", "h3"}
    assert outcome.stats["h1"]["failed"] == 1 and outcome.stats["h2"]["ok"] == 3


def test_a_missing_file_fails_the_host_and_a_rescue_takes_it(run):
    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          tasks:
            - block:
                - name: pick
                  include_tasks: "{{ inventory_hostname }}.yml"
              rescue:
                - name: rescued
                  debug: {msg: "{{ ansible_failed_result.msg }}"}
    """, files={"h2.yml": "- debug: {msg: mine}\n"})
    assert "task file not found: h1.yml" in rec.results("rescued")["h1"]["msg"]
    assert "h2" not in rec.results("rescued")
    assert outcome.exit_code == 0


def test_the_item_and_when_per_item_and_the_include_when_is_not_inherited(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: each
              include_tasks: each.yml
              loop: [1, 2, 3]
              loop_control: {loop_var: n}
              when: n != 2 and done is not defined
    """, files={"each.yml": "- name: shown\n  debug: {msg: 'n={{ n }}'}\n- set_fact: {done: true}\n"})
    shown = [r["msg"] for h, t, r in rec.results() if t == "shown"]
    # the include's when is evaluated once per item when reached (done is not set yet for item 3),
    # never again inside the file: both items run all their tasks
    assert shown == ["n=1", "n=3"]
    assert [r.get("skipped") for h, t, r in rec.results() if t == "each"] == [False, False]



def test_an_outer_item_reaches_a_file_an_inner_templated_include_reads(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: outer
              include_tasks: outer.yml
              loop: [x, y]
              loop_control: {loop_var: outer}
    """, files={"outer.yml": "- include_tasks: 'inner_{{ outer }}.yml'\n",
                "inner_x.yml": "- {name: shown, debug: {msg: 'x sees {{ outer }}'}}\n",
                "inner_y.yml": "- {name: shown, debug: {msg: 'y sees {{ outer }}'}}\n"})
    assert outcome.exit_code == 0, rec.failures()
    assert [r["msg"] for h, t, r in rec.results() if t == "shown"] == ["x sees x", "y sees y"]
