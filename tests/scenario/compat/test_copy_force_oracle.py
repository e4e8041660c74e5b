"""`copy` / `template` with `force: false`, compared with ansible-playbook on the same files: an
existing dest is left exactly as it is (content and mode, `changed: false`), an absent one is
written; `force: true` (the default) replaces the content."""
from __future__ import annotations

import json
import os
import stat

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  tasks:
    - name: kept
      copy: {content: "new\\n", dest: "@D@/kept", force: false, mode: "0600"}
    - name: written
      copy: {content: "new\\n", dest: "@D@/absent", force: false}
    - name: forced
      copy: {content: "new\\n", dest: "@D@/forced", force: true}
    - name: template kept
      template: {src: t.j2, dest: "@D@/tkept", force: false}
"""
FILES = ("kept", "forced", "tkept")


def _outcome(d) -> dict:
    out = {}
    for name in ("kept", "absent", "forced", "tkept"):
        p = os.path.join(d, name)
        out[name] = (open(p).read(), oct(stat.S_IMODE(os.stat(p).st_mode))) if os.path.exists(p) else None
    return out


def _project(root, who):
    d = root / who / "files"
    d.mkdir(parents=True)
    for name in FILES:
        (d / name).write_text("old\n")
        os.chmod(d / name, 0o644)
    (root / who / "t.j2").write_text("new\n")
    (root / who / "inv.yml").write_text(INVENTORY)
    (root / who / "pb.yml").write_text(PLAYBOOK.replace("@D@", str(d)))
    return root / who, d


def test_force_false_as_ansible_core(tmp_path):
    a, ad = _project(tmp_path, "ansible")
    p = oracle.run("ansible-playbook", "-v", "-i", "inv.yml", "pb.yml", cwd=str(a),
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False"})
    assert p.returncode == 0, p.stdout[-2000:]
    want_changed = [line.startswith("changed:") for line in p.stdout.splitlines()
                    if line.startswith(("ok: [h1]", "changed: [h1]"))]
    f, fd = _project(tmp_path, "fleetops")
    run = fleetops("run", "pb.yml", "-i", "inv.yml", "--json", "--results", tmp_path / "runs", cwd=f)
    assert run.returncode == 0, run.stderr
    got_changed = [t["results"]["h1"]["result"]["changed"] for t in json.loads(run.stdout)["plays"][0]["tasks"]]
    assert got_changed == want_changed == [False, True, True, False]
    mine, theirs = _outcome(fd), _outcome(ad)
    # a file fleetops creates is 0600 unless `mode` says otherwise (ansible-core: the umask; README)
    assert mine.pop("absent") == ("new\n", "0o600") and theirs.pop("absent")[0] == "new\n"
    assert mine == theirs
    assert _outcome(fd)["kept"] == ("old\n", "0o644")
