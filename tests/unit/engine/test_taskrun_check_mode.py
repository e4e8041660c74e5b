"""No playbook argument turns check or diff mode off, and no `_`-prefixed argument from a
playbook reaches a payload: refused at validation (one line, file:line), and at run time for
arguments that only a template produces."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fleetops.engine.taskrun import payload_args
from fleetops.engine.module import TaskContext
from fleetops.modules.python import Python


@pytest.mark.parametrize("check,diff", [(True, True), (True, False), (False, True), (False, False)])
def test_payload_args_keep_the_runs_check_and_diff(check, diff):
    a = payload_args({"_check": False, "_diff": False, "_fail_after_step": 1, "_root": "/", "action": "x"},
                     check, diff)
    assert a == {"action": "x", "_check": check, "_diff": diff}


def test_a_module_may_ask_for_a_read_only_call_but_never_turn_check_off():
    assert payload_args({"_check": True}, False, False)["_check"] is True
    assert payload_args({"_check": "no"}, True, False)["_check"] is True


def _run(tmp_path, playbook: str, *extra):
    inv = tmp_path / "inv.ini"
    inv.write_text("[fleet]\nh1 ansible_host=127.0.0.1 ansible_port=1\n")   # refused at once if contacted
    pb = tmp_path / "pb.yml"
    pb.write_text(textwrap.dedent(playbook))
    return subprocess.run([sys.executable, "-m", "fleetops", "run", str(pb), "-i", str(inv),
                           "--results", str(tmp_path / "runs"), *extra],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))


@pytest.mark.parametrize("key", ["_check", "_diff", "_fail_after_step"])
def test_underscore_payload_arguments_are_refused_before_any_host(tmp_path, key):
    proc = _run(tmp_path, f"""
        - hosts: fleet
          gather_facts: false
          tasks:
            - python:
                payload: hermes_swap
                args: {{{key}: false, action: swap}}
        """, "--check")
    assert proc.returncode == 4, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fleetops: error: "), proc.stderr
    assert "pb.yml:7" in lines[0] and f"'{key}'" in lines[0] and "engine's" in lines[0]


def test_templated_underscore_arguments_are_refused_at_run_time():
    calls = []
    ctx = TaskContext(host="h", transport=None, variables={}, check=True, diff=False, host_dir="/nonexistent",
                      payload=lambda *a, **k: calls.append(a) or {}, project_dir=".")
    res = Python().run(ctx, {"payload": "file", "args": {"_check": False, "action": "stat"}})
    assert res["failed"] and "'_check'" in res["msg"] and calls == []


def test_shell_interpolation_without_quote_is_warned_about(tmp_path):
    proc = _run(tmp_path, """
        - hosts: fleet
          gather_facts: false
          vars: {name: x}
          tasks:
            - shell: "echo {{ name }} {{ name | quote }} {{ 'literal' }} > /dev/null"
            - shell: "echo {{ name | quote }}"
            - command: "echo {{ name }}"
        """, "--check")
    warns = [ln for ln in proc.stderr.splitlines() if ln.startswith("fleetops: warning: ")]
    assert len(warns) == 1, proc.stderr
    assert "pb.yml:6" in warns[0] and "'{{ name }}'" in warns[0] and "| quote" in warns[0]
