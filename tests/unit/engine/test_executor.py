"""Task semantics on the LocalTransport: real loader, templar, payloads and modules.

Each "host" works in its own folder under tmp_path, so per-host effects are
visible on disk as well as in the recorded events.
"""
from __future__ import annotations

import threading

import pytest

from fleetops.engine.batches import split_batches
from fleetops.engine.tags import tags_match


def stats_of(outcome, host):
    return outcome.stats[host]


# ---------------------------------------------------------------- pure helpers

@pytest.mark.parametrize("serial,sizes", [
    ([], [8]),
    ([3], [3, 3, 2]),
    ([1, "50%"], [1, 4, 3]),
    (["25%"], [2, 2, 2, 2]),
    (["10%"], [1] * 8),              # 0.8 host rounds down, but at least 1
    ([1, 2, "100%"], [1, 2, 5]),
    ([20], [8]),
])
def test_split_batches_sizes(serial, sizes):
    hosts = [f"h{i}" for i in range(8)]
    batches = split_batches(hosts, serial)
    assert [len(b) for b in batches] == sizes
    assert [h for b in batches for h in b] == hosts


@pytest.mark.parametrize("task_tags,only,skip,expected", [
    ([], set(), set(), True),
    (["never"], set(), set(), False),
    (["never", "debug"], {"debug"}, set(), True),
    (["always"], {"other"}, set(), True),
    (["always"], set(), {"always"}, False),
    (["always"], set(), {"all"}, True),          # as Ansible: only naming always skips it
    (["a"], {"b"}, set(), False),
    (["a"], {"a"}, set(), True),
    (["a"], set(), {"a"}, False),
    ([], {"untagged"}, set(), True),
    (["a"], {"tagged"}, set(), True),
])
def test_tags_match(task_tags, only, skip, expected):
    assert tags_match(task_tags, only, skip) is expected


# ---------------------------------------------------------------- when / register / loop

def test_when_register_and_skip(run):
    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          tasks:
            - name: probe
              command: echo {{ inventory_hostname }}
              register: probe
            - name: only web
              debug: {msg: "web {{ probe.stdout }}"}
              when:
                - "'web' in group_names"
                - probe.rc == 0
    """)
    assert outcome.exit_code == 0 and outcome.status == "ok"
    res = rec.results("only web")
    assert res["h1"]["msg"] == "web h1" and not res["h1"]["skipped"]
    assert res["h3"]["skipped"] and res["h3"]["false_condition"] == "'web' in group_names"
    assert outcome.stats["h3"]["skipped"] == 1 and outcome.stats["h1"]["skipped"] == 0


def test_loop_when_per_item_and_aggregate(run, tmp_path):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: items
              shell: "echo {{ n }} >> @TMP@/loop.txt"
              loop: "{{ [1, 2, 3, 4] }}"
              loop_control: {loop_var: n}
              when: n is even
              register: out
            - name: after
              assert:
                that:
                  - out.results | length == 4
                  - out.results[0].skipped
                  - out.results[1].n == 2
                  - out.changed
    """)
    assert outcome.exit_code == 0, rec.results("after")
    assert (tmp_path / "loop.txt").read_text().split() == ["2", "4"]
    agg = rec.results("items")["h1"]
    assert agg["changed"] and not agg["failed"] and len(agg["results"]) == 4


def test_loop_item_failure_fails_task(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: items
              command: "test {{ item }} -lt 3"
              loop: [1, 2, 3]
            - name: never
              debug: {msg: x}
    """)
    assert outcome.exit_code == 2 and outcome.status == "failed"
    res = rec.results("items")["h1"]
    assert res["failed"] and [r["failed"] for r in res["results"]] == [False, False, True]
    assert "never" not in rec.task_names() or rec.results("never") == {}


# ---------------------------------------------------------------- until / retries

def test_until_retries_until_condition(run, tmp_path):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: count
              shell: "echo x >> @TMP@/count && wc -l < @TMP@/count"
              register: c
              until: c.stdout | int >= 3
              retries: 5
              delay: 0
    """)
    assert outcome.exit_code == 0
    res = rec.results("count")["h1"]
    assert res["attempts"] == 3 and res["stdout"] == "3"
    assert len((tmp_path / "count").read_text().splitlines()) == 3


def test_until_exhausted_fails_after_retries_plus_one(run, tmp_path):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: never ready
              shell: "echo x >> @TMP@/tries; exit 1"
              register: c
              until: c.rc == 0
              retries: 2
              delay: 0
    """)
    assert outcome.exit_code == 2
    res = rec.results("never ready")["h1"]
    assert res["failed"] and res["attempts"] == 3 and res["retries_exhausted"]
    assert len((tmp_path / "tries").read_text().splitlines()) == 3


# ---------------------------------------------------------------- failed_when / changed_when / ignore_errors

def test_failed_when_changed_when(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: grep miss is fine
              shell: "echo abc | grep -q zzz"
              register: g
              failed_when: g.rc not in [0, 1]
              changed_when: false
            - name: success that counts as failure
              command: echo BAD
              register: b
              failed_when: "'BAD' in b.stdout"
    """)
    first = rec.results("grep miss is fine")["h1"]
    assert first["rc"] == 1 and not first["failed"] and not first["changed"]
    assert first["failed_when_result"] is False
    second = rec.results("success that counts as failure")["h1"]
    assert second["failed"] and second["rc"] == 0
    assert outcome.exit_code == 2 and outcome.stats["h1"]["failed"] == 1
    assert outcome.stats["h1"]["changed"] == 0


def test_ignore_errors_continues(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: boom
              command: "false"
              ignore_errors: true
              register: boom
            - name: next
              debug: {msg: "rc was {{ boom.rc }}"}
    """)
    assert outcome.exit_code == 0 and outcome.status == "ok"
    boom = rec.results("boom")["h1"]
    assert boom["failed"] and boom["ignored"]
    assert rec.results("next")["h1"]["msg"] == "rc was 1"
    assert outcome.stats["h1"]["ignored"] == 1 and outcome.stats["h1"]["failed"] == 0


def test_render_error_fails_task_with_message(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: bad
              debug: {msg: "{{ nope_not_defined }}"}
    """)
    assert outcome.exit_code == 2
    assert "nope_not_defined" in rec.results("bad")["h1"]["msg"]


# ---------------------------------------------------------------- blocks

BLOCK_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - name: guarded
      block:
        - name: may fail
          command: "test {{ inventory_hostname }} != h2"
        - name: after failure point
          file: {path: "@TMP@/{{ inventory_hostname }}.block", state: touch}
      rescue:
        - name: rescue step
          file: {path: "@TMP@/{{ inventory_hostname }}.rescue", state: touch}
        - name: failed task name seen
          debug: {msg: "{{ ansible_failed_task.name }}"}
      always:
        - name: always step
          file: {path: "@TMP@/{{ inventory_hostname }}.always", state: touch}
    - name: after block
      file: {path: "@TMP@/{{ inventory_hostname }}.after", state: touch}
"""


def test_block_rescue_always(run, tmp_path):
    outcome, rec = run(BLOCK_PLAY)
    assert outcome.exit_code == 0, outcome
    have = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("h"))
    assert have == sorted(["h1.block", "h1.always", "h1.after", "h3.block", "h3.always", "h3.after",
                           "h2.rescue", "h2.always", "h2.after"])
    assert outcome.stats["h2"]["rescued"] == 1 and outcome.stats["h2"]["failed"] == 0
    assert rec.results("may fail")["h2"]["rescued"] is True
    assert rec.results("failed task name seen")["h2"]["msg"] == "may fail"


def test_block_without_rescue_runs_always_then_host_stops(run, tmp_path):
    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          tasks:
            - block:
                - name: may fail
                  command: "test {{ inventory_hostname }} != h2"
              always:
                - name: always step
                  file: {path: "@TMP@/{{ inventory_hostname }}.always", state: touch}
            - name: after block
              file: {path: "@TMP@/{{ inventory_hostname }}.after", state: touch}
    """)
    assert outcome.exit_code == 2 and outcome.status == "failed"
    assert (tmp_path / "h2.always").exists() and not (tmp_path / "h2.after").exists()
    assert (tmp_path / "h1.after").exists()
    assert outcome.stats["h2"]["failed"] == 1


def test_failure_in_rescue_fails_host(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - block:
                - {name: one, command: "false"}
              rescue:
                - {name: two, command: "false"}
    """)
    assert outcome.exit_code == 2
    assert outcome.stats["h1"]["rescued"] == 1 and outcome.stats["h1"]["failed"] == 1


# ---------------------------------------------------------------- handlers

def test_handlers_notify_listen_order_once(run, tmp_path):
    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          tasks:
            - name: change on web only
              command: echo changed
              changed_when: "'web' in group_names"
              notify: [restart app, reload topic]
            - name: change again
              command: echo again
              changed_when: "'web' in group_names"
              notify: restart app
            - name: unchanged
              command: echo same
              changed_when: false
              notify: never notified
          handlers:
            - name: never notified
              shell: "echo never >> @TMP@/{{ inventory_hostname }}.handlers"
            - name: reload
              listen: reload topic
              shell: "echo reload >> @TMP@/{{ inventory_hostname }}.handlers"
            - name: restart app
              shell: "echo restart >> @TMP@/{{ inventory_hostname }}.handlers"
    """)
    assert outcome.exit_code == 0
    for h in ("h1", "h2"):
        # definition order (reload before restart), each once, although notified twice
        assert (tmp_path / f"{h}.handlers").read_text().split() == ["reload", "restart"]
    assert not (tmp_path / "h3.handlers").exists()
    names = rec.task_names()
    assert names.index("reload") > names.index("unchanged") and "never notified" not in names


def test_failed_host_does_not_run_handlers(run, tmp_path):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - {name: change, command: echo x, notify: h}
            - {name: fail, command: "false"}
          handlers:
            - {name: h, file: {path: "@TMP@/handler-ran", state: touch}}
    """)
    assert outcome.exit_code == 2 and not (tmp_path / "handler-ran").exists()


# ---------------------------------------------------------------- tags

TAGGED = """
- hosts: h1
  gather_facts: false
  tasks:
    - {name: plain, debug: {msg: p}}
    - {name: tagged a, debug: {msg: a}, tags: [a]}
    - {name: tagged b, debug: {msg: b}, tags: b}
    - {name: always, debug: {msg: al}, tags: [always]}
    - {name: never, debug: {msg: nv}, tags: [never, debugonly]}
"""


@pytest.mark.parametrize("tags,skip,expected", [
    (set(), set(), ["plain", "tagged a", "tagged b", "always"]),
    ({"a"}, set(), ["tagged a", "always"]),
    (set(), {"a", "always"}, ["plain", "tagged b"]),
    ({"debugonly"}, set(), ["always", "never"]),
])
def test_tags_select_tasks(run, tags, skip, expected):
    outcome, rec = run(TAGGED, tags=tags, skip_tags=skip)
    assert outcome.exit_code == 0
    assert rec.task_names() == expected


# ---------------------------------------------------------------- run_once, delegate, hostvars

def test_run_once_registers_for_all(run, tmp_path):
    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          tasks:
            - name: once
              shell: "echo {{ inventory_hostname }} >> @TMP@/once.txt; echo {{ inventory_hostname }}"
              run_once: true
              register: who
            - name: everyone sees it
              debug: {msg: "{{ who.stdout }}"}
    """)
    assert outcome.exit_code == 0
    assert (tmp_path / "once.txt").read_text().split() == ["h1"]
    assert {h: r["msg"] for h, r in rec.results("everyone sees it").items()} == {"h1": "h1", "h2": "h1", "h3": "h1"}
    starts = [e for e in rec.of("host_task_start") if e[1] == "once"]
    assert starts == [("h1", "once")]


def test_hostvars_and_magic_vars(run):
    outcome, rec = run("""
        - hosts: web
          gather_facts: false
          tasks:
            - set_fact: {mine: "{{ inventory_hostname }}-fact"}
            - name: look
              debug:
                msg: "{{ hostvars['h2'].mine }} {{ hostvars.h1.inv_var }} {{ groups.db }} {{ ansible_play_hosts }} {{ ansible_play_batch }} {{ fleetops_run_id }} {{ ansible_check_mode }}"
    """)
    assert outcome.exit_code == 0
    assert rec.results("look")["h1"]["msg"] == "h2-fact from_inventory ['h3'] ['h1', 'h2'] ['h1', 'h2'] run-test False"


def test_play_hosts_drop_a_host_that_failed_an_earlier_task(run):
    """ansible_play_hosts / ansible_play_batch as at each task's start: a host that failed before is
    gone from them, ansible_play_hosts_all keeps it (ansible-core's linear strategy)."""
    outcome, rec = run("""
        - hosts: web
          gather_facts: false
          tasks:
            - name: h2 fails
              command: "false"
              when: inventory_hostname == 'h2'
            - name: look
              debug:
                msg: "{{ ansible_play_hosts }} {{ ansible_play_batch }} {{ ansible_play_hosts_all }}"
    """)
    assert outcome.exit_code == 2
    assert rec.results("look")["h1"]["msg"] == "['h1'] ['h1'] ['h1', 'h2']"


def test_a_loop_over_dict2items_shows_the_keys(run):
    """item.key is a mapping entry's key, not a secret: a profile named "default" stays readable."""
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          vars:
            verdicts: {default: healthy, work: fts_index_damage}
          tasks:
            - name: each
              debug: {msg: "{{ item.key }} was {{ item.value }}"}
              loop: "{{ verdicts | dict2items }}"
            - name: after
              debug: {msg: "default was healthy"}
    """)
    assert outcome.exit_code == 0
    assert [r["msg"] for r in rec.results("each")["h1"]["results"]] == ["default was healthy",
                                                                         "work was fts_index_damage"]
    assert rec.results("after")["h1"]["msg"] == "default was healthy"


def test_a_filter_keyword_named_like_a_secret_is_not_a_secret(run):
    """items2dict(key_name=...): key_name is the filter's argument, not data; what the expression
    makes is shown (the repair play's per-profile verdicts are made this way)."""
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          vars:
            rows: [{profile: default, verdict: structural_corruption}]
          tasks:
            - set_fact:
                verdicts: "{{ rows | items2dict(key_name='profile', value_name='verdict') }}"
            - name: show
              debug: {msg: "default: {{ verdicts['default'] }}"}
    """)
    assert outcome.exit_code == 0
    assert rec.results("show")["h1"]["msg"] == "default: structural_corruption"


def test_delegate_to_localhost_runs_on_controller(run, tmp_path):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: local
              command: echo {{ inventory_hostname }}
              delegate_to: localhost
    """)
    assert outcome.exit_code == 0 and rec.results("local")["h1"]["stdout"] == "h1"


# ---------------------------------------------------------------- variables precedence

def test_variable_precedence(run, tmp_path):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          vars:
            a: play
            b: play
            c: play
            d: play
            e: play
          vars_files: [vars.yml]
          tasks:
            - set_fact: {d: fact, e: fact}
            - name: show
              vars: {c: task, d: task}
              debug: {msg: "{{ inv_var }} {{ a }} {{ b }} {{ c }} {{ d }} {{ e }}"}
    """, files={"vars.yml": "b: file\nc: file\n"}, extra_vars={"e": "extra"})
    assert outcome.exit_code == 0
    assert rec.results("show")["h1"]["msg"] == "from_inventory play file task fact extra"


def test_lazy_vars_and_unsafe_registered_output(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          vars:
            base: "/srv/{{ inventory_hostname }}"
            path: "{{ base }}/app"
          tasks:
            - name: braces
              command: echo "{{ '{{' }} inventory_hostname {{ '}}' }}"
              register: out
            - name: show
              debug: {msg: "{{ path }} {{ out.stdout }}"}
    """)
    assert outcome.exit_code == 0
    # host output is data: a template in it is never rendered
    assert rec.results("show")["h1"]["msg"] == "/srv/h1/app {{ inventory_hostname }}"


# ---------------------------------------------------------------- check mode

def test_check_mode_changes_nothing_and_check_mode_false_overrides(run, tmp_path):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: write
              copy: {content: "hello\\n", dest: "@TMP@/checked.txt"}
            - name: dir
              file: {path: "@TMP@/checked.d", state: directory}
            - name: cmd
              command: touch @TMP@/cmd-ran
            - name: forced
              command: touch @TMP@/forced-ran
              check_mode: false
            - name: mode var
              debug: {msg: "{{ ansible_check_mode }}"}
    """, check=True, diff=True)
    assert outcome.exit_code == 0
    assert not (tmp_path / "checked.txt").exists() and not (tmp_path / "checked.d").exists()
    assert not (tmp_path / "cmd-ran").exists() and (tmp_path / "forced-ran").exists()
    write = rec.results("write")["h1"]
    assert write["changed"] and write["msg"].startswith("would create") and "+hello" in write["diff"]
    assert rec.results("cmd")["h1"]["skipped"] and rec.results("cmd")["h1"]["msg"] == "Command would have run if not in check mode"
    assert rec.results("mode var")["h1"]["msg"] == "True"


# ---------------------------------------------------------------- secrets

def test_secret_values_scrubbed_from_events_not_from_vars(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          vars:
            db_password: "s3cr3t-value"
          tasks:
            - name: leak
              command: echo pw={{ db_password }}
              register: leak
            - name: still usable
              assert:
                that: leak.stdout == 'pw=s3cr3t-value'
            - name: msg
              debug: {msg: "the password is {{ db_password }}"}
    """)
    assert outcome.exit_code == 0
    leak = rec.results("leak")["h1"]
    assert "s3cr3t-value" not in repr(leak) and leak["stdout"] == "pw=********"
    assert rec.results("msg")["h1"]["msg"] == "the password is ********"
    assert "s3cr3t-value" not in repr(rec.events)


# ---------------------------------------------------------------- failures, fatal, stop

def test_any_errors_fatal_stops_all_hosts(run, tmp_path):
    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          any_errors_fatal: true
          tasks:
            - name: fail on h2
              command: "test {{ inventory_hostname }} != h2"
            - name: second
              file: {path: "@TMP@/{{ inventory_hostname }}.second", state: touch}
        - hosts: all
          gather_facts: false
          tasks:
            - name: next play
              debug: {msg: x}
    """)
    assert outcome.exit_code == 2
    assert not any(tmp_path.glob("*.second"))
    assert "second" not in rec.task_names() and "next play" not in rec.task_names()
    (reason,) = [e[1] for e in rec.of("play_end")]
    assert reason.startswith("any_errors_fatal") and "h2" in reason


def test_failed_host_excluded_from_next_play(run):
    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          tasks:
            - {name: fail h3, command: "test {{ inventory_hostname }} != h3"}
        - hosts: all
          gather_facts: false
          tasks:
            - {name: second play, debug: {msg: x}}
    """)
    assert outcome.exit_code == 2
    assert sorted(rec.results("second play")) == ["h1", "h2"]
    assert rec.of("play_start")[1][2] == ["h1", "h2"]


def test_stop_event_interrupts_between_tasks(run, tmp_path):
    stop = threading.Event()

    def on_result(host, play_index, task_index, task_name, module, result, started, ended):
        if task_name == "first":
            stop.set()

    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          tasks:
            - {name: first, file: {path: "@TMP@/{{ inventory_hostname }}.first", state: touch}}
            - {name: second, file: {path: "@TMP@/{{ inventory_hostname }}.second", state: touch}}
    """, stop=stop, forks=5, hooks={"host_result": on_result})
    assert outcome.status == "interrupted" and outcome.exit_code == 130
    assert len(list(tmp_path.glob("*.first"))) == 3       # running task finished on every host
    assert not list(tmp_path.glob("*.second"))
    assert rec.of("run_end")[0][0] == "interrupted"
    assert rec.of("play_end")[0][1] == "interrupted"


def test_event_stream_shape(run):
    outcome, rec = run("""
        - hosts: web
          gather_facts: false
          tasks:
            - {name: one, command: echo 1}
    """)
    names = [e[0] for e in rec.events]
    assert names[0] == "run_start" and names[-1] == "run_end"
    assert names.index("play_start") < names.index("batch_start") < names.index("task_start")
    for _host, _pi, _ti, _tname, module, result, started, ended in rec.of("host_result"):
        assert module == "command" and started <= ended
        for key in ("changed", "failed", "skipped", "msg", "unreachable", "rescued", "ignored", "duration"):
            assert key in result
    assert rec.of("run_end")[0] == ("ok", outcome.stats, 0)
