"""`file: state=link`, compared with ansible-playbook on the same files: a new link, the same link
again (ok), a link moved to another target, a relative target, a missing target (refused unless
`force`), a regular file in the way (refused unless `force`, then replaced), a directory in the
way (refused); every `changed`, failure message and the links left on disk."""
from __future__ import annotations

import json
import os

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"
TASKS = [
    ("new", "{path: '@D@/l1', src: '@D@/target', state: link}"),
    ("again", "{path: '@D@/l1', src: '@D@/target', state: link}"),
    ("moved", "{path: '@D@/l1', src: '@D@/other', state: link}"),
    ("relative", "{path: '@D@/l2', src: target, state: link}"),
    ("missing", "{path: '@D@/l3', src: '@D@/nosuch', state: link}"),
    ("missing forced", "{path: '@D@/l3', src: '@D@/nosuch', state: link, force: true}"),
    ("file in the way", "{path: '@D@/afile', src: '@D@/target', state: link}"),
    ("file forced", "{path: '@D@/afile', src: '@D@/target', state: link, force: true}"),
    ("dir in the way", "{path: '@D@/adir', src: '@D@/target', state: link}"),
]
PLAYBOOK = "- hosts: h1\n  gather_facts: false\n  tasks:\n" + "".join(
    f"    - name: {name}\n      file: {args}\n      ignore_errors: true\n" for name, args in TASKS)


def _project(root, who):
    d = root / who / "files"
    d.mkdir(parents=True)
    for name in ("target", "other", "afile"):
        (d / name).write_text(name)
    (d / "adir").mkdir()
    (root / who / "inv.yml").write_text(INVENTORY)
    (root / who / "pb.yml").write_text(PLAYBOOK.replace("@D@", str(d)))
    return root / who, d


def _links(d) -> dict:
    return {n: os.readlink(d / n) if os.path.islink(d / n) else None for n in ("l1", "l2", "l3", "afile", "adir")}


def test_links_as_ansible_core(tmp_path):
    a, ad = _project(tmp_path, "ansible")
    p = oracle.run("ansible-playbook", "-v", "-i", "inv.yml", "pb.yml", cwd=str(a),
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False"})
    assert p.returncode == 0, p.stdout[-2000:]
    want = []
    for line in p.stdout.splitlines():
        if line.startswith(("ok: [h1]", "changed: [h1]", "fatal: [h1]")):
            res = json.loads(line.split(" => ", 1)[1])
            failed = line.startswith("fatal:")
            want.append((failed, res.get("changed"), res.get("msg") if failed else None))
    f, fd = _project(tmp_path, "fleetops")
    run = fleetops("run", "pb.yml", "-i", "inv.yml", "--json", "--results", tmp_path / "runs", cwd=f)
    assert run.returncode == 0, run.stderr
    got = [(r["failed"], r["changed"], r["msg"] if r["failed"] else None)
           for t in json.loads(run.stdout)["plays"][0]["tasks"] for r in [t["results"]["h1"]["result"]]]
    got = [(fl, ch, m.replace(str(fd), str(ad)) if m else m) for fl, ch, m in got]
    assert got == want
    assert {k: v and v.replace(str(fd), str(ad)) for k, v in _links(fd).items()} == _links(ad)
