"""gather_facts on the mixed hosts, through the real CLI: the facts must be the host's own.

arm01 runs aarch64 binaries under qemu and old01 runs Debian bullseye; if the facts
payload ran anywhere but on those hosts' own python3, these values could not appear.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.support.paths import REPO

pytestmark = pytest.mark.lab
REPO = str(REPO)

PLAYBOOK = """
- hosts: lab
  gather_facts: true
  tasks:
    - name: sqlite from a payload-free command
      command: python3 -c "import sqlite3, platform; print(platform.machine(), sqlite3.sqlite_version)"
      register: probe
    - name: arm only
      when: ansible_architecture == "aarch64"
      debug: {msg: "aarch64 host"}
"""


def _vt(text):
    return tuple(int(x) for x in text.split(".")[:2])


def _run(mixed_lab, tmp_path, *argv):
    return subprocess.run([sys.executable, "-m", "fleetops", *argv], capture_output=True, text=True,
                          cwd=REPO, timeout=600)


def test_facts_show_aarch64_and_older_versions(mixed_lab, tmp_path):
    pb = tmp_path / "facts.yml"
    pb.write_text(PLAYBOOK)
    p = _run(mixed_lab, tmp_path, "run", str(pb), "-i", mixed_lab.inventory_path, "--json",
             "--results", str(tmp_path / "runs"))
    assert p.stdout.strip(), p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert p.returncode == 0 and doc["exit_code"] == 0, p.stderr[-3000:]
    facts = doc["facts"]
    assert set(facts) == {"lab01", "arm01", "old01"}
    native, arm, old = facts["lab01"], facts["arm01"], facts["old01"]

    assert arm["ansible_architecture"] == "aarch64" and arm["ansible_machine"] == "aarch64"
    assert arm["ansible_distribution"] == "Debian" and arm["ansible_distribution_release"] == "bookworm"
    assert arm["ansible_user_id"] == mixed_lab.ssh_params("arm01").user
    assert arm["ansible_user_dir"] == f"/home/{arm['ansible_user_id']}"

    assert old["ansible_architecture"] == "x86_64"
    assert old["ansible_distribution_release"] == "bullseye"
    assert _vt(old["ansible_python_version"]) == (3, 9)
    assert _vt(old["ansible_sqlite_version"]) == (3, 34)
    assert _vt(old["ansible_python_version"]) < _vt(native["ansible_python_version"])
    assert _vt(old["ansible_sqlite_version"]) < _vt(native["ansible_sqlite_version"])
    assert old["fleetops_sqlite_fts5"] is True
    assert old["ansible_distribution_major_version"] == "11" and old["ansible_distribution_version"].startswith("11.")
    assert arm["ansible_distribution_major_version"] == "12"
    for f in (native, arm, old):
        assert f["ansible_pkg_mgr"] == "apt"
        assert f["ansible_env"]["HOME"] == f["ansible_user_dir"]
        assert isinstance(f["ansible_default_ipv4"], dict)

    tasks = {t["name"]: t for t in doc["plays"][0]["tasks"]}
    probe = {h: r["result"]["stdout"].split() for h, r in tasks["sqlite from a payload-free command"]["results"].items()}
    assert probe["arm01"][0] == "aarch64" and probe["old01"][1] == old["ansible_sqlite_version"]
    arm_only = tasks["arm only"]["results"]
    assert arm_only["arm01"]["status"] == "ok"
    assert arm_only["old01"]["status"] == arm_only["lab01"]["status"] == "skipped"


def test_inventory_groups(mixed_lab, tmp_path):
    for group, host in (("aarch64", "arm01"), ("oldstable", "old01")):
        p = _run(mixed_lab, tmp_path, "hosts", "-i", mixed_lab.inventory_path, "--limit", group, "--json")
        assert p.returncode == 0, p.stderr
        assert list(json.loads(p.stdout)["hosts"]) == [host]
    p = _run(mixed_lab, tmp_path, "hosts", "-i", mixed_lab.inventory_path, "--limit", "lab", "--json")
    assert sorted(json.loads(p.stdout)["hosts"]) == ["arm01", "lab01", "old01"]
