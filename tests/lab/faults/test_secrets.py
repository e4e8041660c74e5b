"""Secrets never leave through fleetops: terminal, --json, the results store (runs.db and its
WAL), the run folder, `fleetops report` and error lines are grepped for every value after a
run that uses them in messages, command arguments and registered output."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli_run import by_task, fleetops, one_error_line, write, write_inventory

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
    term = fleetops("run", pb, "-i", inv, "--diff", "--results", runs, *extra, cwd=work, test_payloads=True)
    as_json = fleetops("run", pb, "-i", inv, "--diff", "--json", "--results", runs, *extra, cwd=work,
                       test_payloads=True)
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


ODD_PLAYBOOK = """
- hosts: fleet
  gather_facts: false
  tasks:
    - name: echo
      command: echo {{ db_password }} {{ pin_secret }} {{ app_token[0] }} {{ app_token[1] }} {{ vault_secret.inner }}
    - name: derived
      command: echo {{ pin_secret | b64encode }} {{ db_password | string | b64encode }}
    - name: keep
      set_fact: {encoded: "{{ pin_secret | b64encode }}"}
    - name: later
      debug: {msg: "encoded {{ encoded }}; admin_user={{ admin_user }}"}
    - name: write
      copy: {content: "pin={{ pin_secret }} db={{ db_password }}\\n", dest: "~/fault-odd.conf", mode: "0600"}
    - name: fetch it
      fetch: {src: "~/fault-odd.conf", dest: odd.conf}
"""
# every secret-named scalar, whatever its type or length, and what templates make of them
ODD = {"db_password": 12345678, "pin_secret": "abc", "app_token": ["k-one", 98765],
       "vault_secret": {"inner": 271.828}, "ui_password": "admin"}
ODD_TEXTS = ["12345678", "abc", "k-one", "98765", "271.828", "YWJj", "MTIzNDU2Nzg="]


def _grep_values(data: str, values) -> list:
    import re
    return [v for v in values if re.search(r"(?<![\w])" + re.escape(v) + r"(?![\w])", data)]


def test_short_and_non_string_secrets_and_their_derivatives_are_masked(fleet, work):
    """Ints, floats, 3-letter strings, list items and dict members under secret names, and their
    b64encode, never show; a host named like a secret (db-password-01, ssh-key-02) is a name."""
    import yaml
    inv = Path(write_inventory(work / "inv.yml", fleet, [0, 1], group_vars=dict(ODD, admin_user="admin_user")))
    doc = yaml.safe_load(inv.read_text())
    hosts = doc["all"]["children"]["fleet"]["hosts"]
    doc["all"]["children"]["fleet"]["hosts"] = dict(zip(("db-password-01", "ssh-key-02"), hosts.values()))
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    pb = write(work / "odd.yml", ODD_PLAYBOOK)
    runs = work / "runs-odd"
    term = fleetops("run", pb, "-i", inv, "--results", runs, cwd=work)
    as_json = fleetops("run", pb, "-i", inv, "--json", "--results", runs, cwd=work)
    assert term.returncode == 0 and as_json.returncode == 0, term.stdout[-3000:] + term.stderr
    assert "db-password-01" in term.stdout and "ssh-key-02" in term.stdout   # the recap names them
    tasks = by_task(json.loads(as_json.stdout))
    assert tasks["echo"]["db-password-01"][1]["stdout"] == " ".join([MASK_] * 5)
    assert tasks["derived"]["ssh-key-02"][1]["stdout"] == f"{MASK_} {MASK_}"
    # the name admin_user stays, though the password `admin` is inside it
    assert tasks["later"]["ssh-key-02"][1]["msg"] == f"encoded {MASK_}; admin_user=admin_user"
    assert (Path(fleet.hosts[0]["home"]) / "fault-odd.conf").read_text() == "pin=abc db=12345678\n"
    report = fleetops("report", "latest", "--json", "--results", runs, cwd=work)
    hosts_out = fleetops("hosts", "-i", inv, "--json", cwd=work)
    for proc in (term, as_json, report, hosts_out):
        assert _grep_values(proc.stdout + proc.stderr, ODD_TEXTS) == []
    shown = json.loads(hosts_out.stdout)["hosts"]
    assert set(shown) == {"db-password-01", "ssh-key-02"} and shown["ssh-key-02"]["admin_user"] == "admin_user"
    files = [p for p in runs.rglob("*") if p.is_file()]
    fetched = [p for p in files if p.name == "odd.conf"]
    assert len(fetched) == 4 and fetched[0].read_text() == f"pin={MASK_} db={MASK_}\n"
    for p in files:
        assert _grep_values(p.read_bytes().decode("utf-8", "replace"), ODD_TEXTS) == [], p
    # an error line that quotes a value scrubs it too
    bad = write(work / "bad-odd.yml", "- hosts: fleet\n  serial: '{{ pin_secret }}'\n  tasks: []\n")
    proc = fleetops("run", bad, "-i", inv, "-e", "pin_secret=abc", cwd=work)
    assert proc.returncode == 4, proc.stderr
    assert _grep_values(one_error_line(proc), ["abc"]) == [], proc.stderr
    for i in (0, 1):
        os.unlink(Path(fleet.hosts[i]["home"]) / "fault-odd.conf")


MASK_ = "********"
