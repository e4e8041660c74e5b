"""Controller faults: fleetops itself SIGKILLed mid-run; two fleetops runs on one host at once."""
from __future__ import annotations

import json
import signal

import pytest

from fleetops.engine.results import integrity_ok
from tests.support.cli_run import (by_task, fleetops, home, report_json, start_fleetops, wait_for, write,
                                   write_inventory)

pytestmark = pytest.mark.lab


def test_controller_sigkilled_mid_run(fleet, work):
    inv = write_inventory(work / "inv.yml", fleet, [0, 1])
    pb = write(work / "pb.yml", """
- hosts: fleet
  gather_facts: false
  tasks:
    - name: quick
      command: touch fault-quick
    - name: slow
      shell: touch ~/fault-started; sleep 4
""")
    runs = work / "runs"
    proc = start_fleetops("run", pb, "-i", inv, "--results", runs, cwd=work)
    try:
        wait_for(lambda: all((home(fleet, i) / "fault-started").exists() for i in (0, 1)),
                 "the slow task to start on both hosts", proc=proc)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    # the store is intact and readable, and says what happened
    assert integrity_ok(runs / "runs.db")
    doc = report_json(runs, cwd=work)
    killed_id = doc["run_id"]
    assert (doc["status"], doc["recorded_status"], doc["status_note"]) == ("interrupted", "running",
                                                                          "no end recorded")
    assert {h: s for h, (s, _) in by_task(doc)["quick"].items()} == {"lab01": "changed", "lab02": "changed"}
    text = fleetops("report", killed_id, "--results", runs, cwd=work)
    assert text.returncode == 0 and "interrupted (no end recorded)" in text.stdout
    # a re-run proceeds on the same hosts: nothing (no lock, no half-written store) is left in its way
    again = fleetops("run", pb, "-i", inv, "--json", "--results", runs, cwd=work)
    assert again.returncode == 0, again.stderr + again.stdout
    assert json.loads(again.stdout)["status"] == "ok"
    assert integrity_ok(runs / "runs.db")
    listed = fleetops("report", "--list", "--json", "--results", runs, cwd=work)
    statuses = {r["id"]: r["status"] for r in json.loads(listed.stdout)["runs"]}
    assert statuses[killed_id] == "interrupted" and list(statuses.values()).count("ok") == 1


def test_two_runs_on_one_host_the_second_refuses(fleet, work):
    inv = write_inventory(work / "inv.yml", fleet, [0, 1, 2])
    first = write(work / "first.yml", """
- hosts: lab01:lab02
  gather_facts: false
  tasks:
    - name: long
      shell: touch ~/fault-started; sleep 4; echo first >> ~/fault-order
    - name: end
      shell: echo first-end >> ~/fault-order
""")
    second = write(work / "second.yml", """
- hosts: lab01:lab03
  gather_facts: true
  tasks:
    - name: intrude
      shell: echo second >> ~/fault-order
""")
    a = start_fleetops("run", first, "-i", inv, "--json", "--results", work / "runs", cwd=work)
    try:
        wait_for(lambda: (home(fleet, 0) / "fault-started").exists(), "the first run to start", proc=a)
        b = fleetops("run", second, "-i", inv, "--json", "--results", work / "runs", cwd=work)
        out_a, err_a = a.communicate(timeout=300)
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode == 0, err_a.decode()
    first_id = json.loads(out_a)["run_id"]
    assert b.returncode == 2, b.stderr
    tasks = by_task(json.loads(b.stdout))
    status, res = tasks["Gathering Facts"]["lab01"]
    assert status == "failed" and res["host_busy"] is True
    assert res["msg"].startswith(f"host busy: another fleetops run holds its run lock (run {first_id}, ")
    assert res["msg"].endswith("; nothing was run on lab01")
    assert tasks["Gathering Facts"]["lab03"][0] == "ok"
    assert list(tasks["intrude"]) == ["lab03"]
    # the first run was never interleaved with
    assert (home(fleet, 0) / "fault-order").read_text() == "first\nfirst-end\n"
    assert (home(fleet, 2) / "fault-order").read_text() == "second\n"
    # the lock went with the first run: the same playbook now runs there
    c = fleetops("run", second, "-i", inv, "--json", "--results", work / "runs", cwd=work)
    assert c.returncode == 0, c.stdout
    assert (home(fleet, 0) / "fault-order").read_text() == "first\nfirst-end\nsecond\n"
    # and nothing was left in the homes by the lock itself
    assert not (home(fleet, 0) / ".fleetops").exists()
