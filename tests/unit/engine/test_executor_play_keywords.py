"""Play keywords and meta tasks as ansible-core runs them (checked there: see tests/compat)."""
from __future__ import annotations


def test_meta_end_host_flush_and_end_play(run):
    outcome, rec = run("""
        - hosts: all
          gather_facts: false
          tasks:
            - name: notify
              command: "true"
              notify: h
            - name: flush
              meta: flush_handlers
            - name: after flush
              debug: {msg: after}
            - name: end h2 only
              meta: end_host
              when: inventory_hostname == 'h2'
            - name: still running
              debug: {msg: running}
          handlers:
            - name: h
              debug: {msg: handled}
        - hosts: all
          gather_facts: false
          tasks:
            - name: end the play
              meta: end_play
            - name: never
              debug: {msg: never}
    """)
    assert outcome.exit_code == 0, rec.failures()
    names = rec.task_names()
    assert names.index("h") < names.index("after flush")          # the handler ran at the flush
    assert sorted(rec.results("still running")) == ["h1", "h3"]   # h2 ended, not failed
    assert outcome.stats["h2"]["failed"] == 0
    assert "never" not in names


def test_implicit_localhost_and_order(run):
    outcome, rec = run("""
        - hosts: localhost
          gather_facts: false
          tasks:
            - {name: here, command: "true"}
        - hosts: all
          gather_facts: false
          order: reverse_sorted
          tasks:
            - {name: ordered, debug: {msg: x}}
    """)
    assert outcome.exit_code == 0, rec.failures()
    assert list(rec.results("here")) == ["localhost"]
    assert rec.of("play_start")[1][2] == ["h3", "h2", "h1"]
    assert "localhost" not in rec.results("ordered")          # the implicit localhost is not in `all`
