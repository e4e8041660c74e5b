"""Secrets never leave through fleetops: terminal, --json, the results store (runs.db and its
WAL), the run folder, `fleetops report` and error lines are grepped for every value after a
run that uses them in messages, command arguments and registered output."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.faults.conftest import by_task, fleetops, one_error_line, write, write_inventory

pytestmark = pytest.mark.lab

SECRETS = {
    "db_password": "Pw-Alpha-71f3e",
    "api_token": "Tok-Bravo-82c4d",
    "client_secret": "Sec-Charlie-93d5c",
    "ssh_key_passphrase": "Pass-Delta-a4e6b",
    "extra_password": "Xtra-Echo-b5f7a",      # given with -e
}

PLAYBOOK = """
- hosts: fleet
  gather_facts: true
  vars:
    ssh_key_passphrase: Pass-Delta-a4e6b
  tasks:
    - name: say
      debug: {msg: "db {{ db_password }} token {{ api_token }} secret {{ client_secret }}"}
    - name: echo
      command: echo {{ api_token }} {{ client_secret }} {{ ssh_key_passphrase }}
      register: echoed
    - name: show registered
      debug: {var: echoed}
    - name: hostvars
      debug: {var: "hostvars[inventory_hostname]"}
    - name: copy a plain name
      set_fact: {plain: "{{ db_password }}"}
    - name: show plain
      debug: {var: plain}
    - name: stderr and failure
      shell: "echo {{ db_password | quote }} >&2; echo {{ extra_password }}; exit 3"
      ignore_errors: true
    - name: write it on the host
      copy: {content: "pw={{ db_password }}\\n", dest: "~/fault-secret.conf", mode: "0600"}
    - name: crash with it
      python:
        payload: selftest_crash
        args: {message: "crash {{ client_secret }}"}
      ignore_errors: true
    - name: fetch something
      fetch: {src: "~/.profile", dest: profile}
    - name: fail with it
      command: "false {{ db_password }} {{ api_token }}"
"""


def _grep(paths, values) -> list:
    hits = []
    for path in paths:
        data = Path(path).read_bytes()
        for v in values:
            if v.encode() in data:
                hits.append((str(path), v))
    return hits


def test_secret_values_appear_nowhere(fleet, work):
    inv = write_inventory(work / "inv.yml", fleet, [0, 1], overrides={
        0: {"db_password": SECRETS["db_password"], "api_token": SECRETS["api_token"]},
        1: {"db_password": SECRETS["db_password"], "api_token": SECRETS["api_token"]}},
        group_vars={"client_secret": SECRETS["client_secret"]})
    pb = write(work / "pb.yml", PLAYBOOK)
    runs = work / "runs"
    extra = ["-e", f"extra_password={SECRETS['extra_password']}"]
    term = fleetops("run", pb, "-i", inv, "--diff", "--results", runs, *extra, cwd=work)
    as_json = fleetops("run", pb, "-i", inv, "--diff", "--json", "--results", runs, *extra, cwd=work)
    assert term.returncode == 2 and as_json.returncode == 2, term.stdout[-2000:] + term.stderr
    doc = json.loads(as_json.stdout)
    tasks = by_task(doc)
    # the values were really used (the hosts saw them) ...
    assert (Path(fleet.hosts[0]["home"]) / "fault-secret.conf").read_text() == f"pw={SECRETS['db_password']}\n"
    assert tasks["echo"]["lab01"][1]["stdout"] == "******** ******** ********"
    assert tasks["say"]["lab01"][1]["msg"] == "db ******** token ******** secret ********"
    assert tasks["show plain"]["lab01"][1]["plain"] == "********"
    assert "crash ********" in tasks["crash with it"]["lab01"][1]["msg"]
    # ... and are nowhere in what fleetops shows or keeps
    report = fleetops("report", "latest", "--results", runs, cwd=work)
    report_j = fleetops("report", "latest", "--json", "--results", runs, cwd=work)
    hosts = fleetops("hosts", "-i", inv, cwd=work)
    for proc in (term, as_json, report, report_j, hosts):
        assert proc.returncode in (0, 2)
        for v in SECRETS.values():
            assert v not in proc.stdout and v not in proc.stderr, v
    files = [p for p in runs.rglob("*") if p.is_file()]
    assert any(p.name == "runs.db" for p in files) and any(p.name == "profile" for p in files)
    assert _grep(files, SECRETS.values()) == []
    # an error line cannot leak one either
    bad = write(work / "bad.yml", "- hosts: fleet\n  tasks:\n    - command: echo {{ db_password }} {{ nosuch }}\n")
    proc = fleetops("run", bad, "-i", inv, *extra, cwd=work)
    assert proc.returncode == 4 and "undefined variable 'nosuch'" in one_error_line(proc)
    for v in SECRETS.values():
        assert v not in proc.stderr
    os.unlink(Path(fleet.hosts[0]["home"]) / "fault-secret.conf")
