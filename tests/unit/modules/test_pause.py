"""`pause`: waits its seconds/minutes, wakes when the run is stopped, and a prompt that would wait
for a key press is refused when the playbook is checked, at its line."""
from __future__ import annotations

import threading

import pytest

from fleetops.engine.lint import check_playbook
from fleetops.engine.playbook import load_playbook
from fleetops.errors import BadInput
from fleetops.extensions import registry
from tests.support.playbook_run import run_yaml


def test_pause_waits_its_seconds(tmp_path):
    outcome, rec = run_yaml(tmp_path, """
        - hosts: h1
          gather_facts: false
          tasks:
            - name: settle
              pause: {seconds: 0.3, prompt: "letting it settle"}
            - pause: {minutes: 0}
    """)
    assert outcome.exit_code == 0, rec.failures()
    res = rec.results("settle")["h1"]
    assert res["delta"] >= 0.3 and not res["changed"] and res["stdout"].startswith("Paused for")


def test_a_stopped_run_wakes_the_pause(tmp_path):
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    try:
        outcome, rec = run_yaml(tmp_path, """
            - hosts: h1
              gather_facts: false
              tasks:
                - name: long
                  pause: {minutes: 30}
        """, stop=stop)
    finally:
        timer.cancel()
    res = rec.results("long")["h1"]
    assert res["failed"] and "interrupted" in res["msg"]
    assert outcome.exit_code == 130


@pytest.mark.parametrize("args, fragment", [
    ('{prompt: "Press enter"}', "waits for a key press"),
    ("{}", "waits for a key press"),
    ("{seconds: 1, minutes: 1}", "not both"),
])
def test_pause_refusals_at_load(tmp_path, args, fragment):
    pb = tmp_path / "pb.yml"
    pb.write_text(f"- hosts: all\n  tasks:\n    - pause: {args}\n")
    modules = registry().modules
    with pytest.raises(BadInput) as exc:
        check_playbook(load_playbook(str(pb), modules), modules)
    assert fragment in exc.value.msg and exc.value.where.endswith("pb.yml:3:7")
