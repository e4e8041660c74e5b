"""Network faults: a host dies mid-task, a host never speaks SSH, a host answers slowly.

Each: the run goes on for the other hosts, the faulty one is reported unreachable with a
clear reason (exit 3), and nothing more runs on it.
"""
from __future__ import annotations

import json
import shutil

import pytest

from tests.support.cli_run import (by_task, fleetops, home, kill_host_sshd, restart_lab, start_fleetops, wait_for, write,
                      write_inventory)

pytestmark = pytest.mark.lab

SLOW_THEN_AFTER = """
- hosts: fleet
  gather_facts: false
  tasks:
    - name: slow
      shell: touch ~/fault-started; sleep 5; touch ~/fault-finished
    - name: after
      command: touch fault-after
"""


def test_sshd_killed_in_the_middle_of_a_task(fleet, work):
    inv = write_inventory(work / "inv.yml", fleet, [0, 1])
    pb = write(work / "pb.yml", SLOW_THEN_AFTER)
    proc = start_fleetops("run", pb, "-i", inv, "--json", "--results", work / "runs", cwd=work)
    try:
        wait_for(lambda: (home(fleet, 0) / "fault-started").exists(), "the task to start on lab01", proc=proc)
        killed = kill_host_sshd(fleet, 0)
        assert len(killed) > 1            # the listener and the session processes under it
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
        restart_lab(fleet)
    assert proc.returncode == 3, err.decode()
    doc = json.loads(out)
    tasks = by_task(doc)
    status, res = tasks["slow"]["lab01"]
    assert status == "unreachable"
    assert "connection lost" in res["msg"] and "127.0.0.1:" in res["msg"]
    assert tasks["slow"]["lab02"][0] == "changed"
    assert tasks["after"] == {"lab02": tasks["after"]["lab02"]} and tasks["after"]["lab02"][0] == "changed"
    assert doc["stats"]["lab01"]["unreachable"] == 1 and doc["stats"]["lab02"]["failed"] == 0
    # the dead host's task never finished and nothing after it ran there
    assert not (home(fleet, 0) / "fault-finished").exists()
    assert not (home(fleet, 0) / "fault-after").exists()
    assert (home(fleet, 1) / "fault-finished").exists() and (home(fleet, 1) / "fault-after").exists()


def test_host_that_accepts_tcp_but_never_speaks_ssh(fleet, work, listener):
    silent = listener("silent")
    inv = write_inventory(work / "inv.yml", fleet, [0, 1],
                          overrides={0: {"ansible_port": silent.port, "fleetops_connect_timeout": 2}})
    pb = write(work / "pb.yml", SLOW_THEN_AFTER.replace("sleep 5", "true"))
    proc = fleetops("run", pb, "-i", inv, "--json", "--results", work / "runs", cwd=work)
    assert proc.returncode == 3, proc.stderr
    assert silent.connections >= 1
    tasks = by_task(json.loads(proc.stdout))
    status, res = tasks["slow"]["lab01"]
    assert status == "unreachable"
    assert res["msg"] == f"127.0.0.1:{silent.port}: no SSH banner within 2s (not an SSH server, or it is overloaded)"
    assert "lab01" not in tasks["after"]
    assert tasks["after"]["lab02"][0] == "changed"
    assert (home(fleet, 1) / "fault-after").exists()


def _known_hosts_with(fleet, work, extra_ports: dict) -> str:
    """The lab's known_hosts plus, for each listener port, the key of the lab host it relays to."""
    path = work / "known_hosts"
    shutil.copy(fleet.known_hosts_path, path)
    with open(path, "a") as f:
        for port, i in extra_ports.items():
            ktype, blob = open(fleet.hosts[i]["host_key"] + ".pub").read().split()[:2]
            f.write(f"[127.0.0.1]:{port} {ktype} {blob}\n")
    return str(path)


def test_host_answering_after_a_long_delay(fleet, work, listener):
    slow = listener("forward", target=int(fleet.hosts[0]["port"]), delay=8)     # beyond its 2 s
    late = listener("forward", target=int(fleet.hosts[1]["port"]), delay=1)     # within its 15 s
    kh = _known_hosts_with(fleet, work, {slow.port: 0, late.port: 1})
    inv = write_inventory(work / "inv.yml", fleet, [0, 1, 2], known_hosts=kh, overrides={
        0: {"ansible_port": slow.port, "fleetops_connect_timeout": 2},
        1: {"ansible_port": late.port, "fleetops_connect_timeout": 15}})
    pb = write(work / "pb.yml", SLOW_THEN_AFTER.replace("sleep 5", "true"))
    proc = fleetops("run", pb, "-i", inv, "--json", "--results", work / "runs", cwd=work)
    assert proc.returncode == 3, proc.stderr
    tasks = by_task(json.loads(proc.stdout))
    status, res = tasks["slow"]["lab01"]
    assert status == "unreachable" and "no SSH banner within 2s" in res["msg"]
    assert tasks["slow"]["lab02"][0] == "changed"          # slow, but within its timeout: fine
    assert tasks["slow"]["lab03"][0] == "changed"
    assert sorted(tasks["after"]) == ["lab02", "lab03"]
    assert not (home(fleet, 0) / "fault-started").exists()
    assert (home(fleet, 1) / "fault-after").exists()
