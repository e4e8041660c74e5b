"""Modules fleetops has no native version of, run through the ansible-core module bridge and
compared with ansible-playbook on the same files, with and without --check and --diff: `replace`
(a change, a missing file), `blockinfile`, `slurp`, `getent` (database passwd, key root) and
`expect` (no check mode: skipped with ansible-core's message); every status, `changed`, failure
or skip message, diff, slurped content and fact, and the file left on disk."""
from __future__ import annotations

import json

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"
TEXT = "hello world\nfoo bar\nfoo again\n"
TASKS = [
    ("replace", "replace: {path: '@D@/f.txt', regexp: 'foo', replace: 'baz'}"),
    ("replace again", "ansible.builtin.replace: {path: '@D@/f.txt', regexp: 'foo', replace: 'baz'}"),
    ("replace missing", "replace: {path: '@D@/nosuch.txt', regexp: 'foo'}"),
    ("block", "blockinfile: {path: '@D@/f.txt', block: 'x=1', marker: '# {mark} M'}"),
    ("block create", "blockinfile: {path: '@D@/new.txt', block: 'y=2', create: true, mode: '0600'}"),
    ("slurp", "slurp: {src: '@D@/f.txt'}"),
    ("getent", "getent: {database: passwd, key: root}"),
    ("expect", "expect: {command: 'true', responses: {}}"),
]
PLAYBOOK = "- hosts: h1\n  gather_facts: false\n  tasks:\n" + "".join(
    f"    - name: {name}\n      {task}\n      ignore_errors: true\n" for name, task in TASKS)
MODES = [(), ("--check",), ("--diff",), ("--check", "--diff")]


def _project(root, who):
    d = root / who / "files"
    d.mkdir(parents=True)
    (d / "f.txt").write_text(TEXT)
    (root / who / "inv.yml").write_text(INVENTORY)
    (root / who / "pb.yml").write_text(PLAYBOOK.replace("@D@", str(d)))
    return root / who, d


def _outcome(status: str, res: dict, d, diff: bool) -> tuple:
    """What is compared of one task's result, its directory's path made neutral. A module's
    diff is kept by fleetops under --diff only (ansible-core keeps it in the result, unshown)."""
    text = json.dumps({
        "status": status, "changed": res.get("changed"),
        "msg": res.get("msg") if status in ("failed", "skipped") else None,
        "diff": res.get("diff") if diff else None, "content": res.get("content"),
        "facts": sorted(res.get("ansible_facts") or {}),
    }, sort_keys=True)
    return json.loads(text.replace(str(d), "@D@"))


def _disk(d) -> dict:
    return {p.name: (p.read_text(), oct(p.stat().st_mode & 0o777)) for p in sorted(d.iterdir())}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "+".join(m) or "plain")
def test_bridged_modules_as_ansible_core(tmp_path, mode):
    a, ad = _project(tmp_path, "ansible")
    p = oracle.run("ansible-playbook", "-vvv", "-i", "inv.yml", "pb.yml", *mode, cwd=str(a),
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False"})
    assert p.returncode == 0, p.stdout[-2000:]
    kinds = {"ok: [h1]": "ok", "changed: [h1]": "changed", "fatal: [h1]": "failed", "skipping: [h1]": "skipped"}
    want = []
    for line in p.stdout.splitlines():
        for prefix, status in kinds.items():
            if line.startswith(prefix) and " => " in line:
                want.append(_outcome(status, json.loads(line.split(" => ", 1)[1]), ad, "--diff" in mode))
    assert len(want) == len(TASKS), p.stdout[-3000:]
    f, fd = _project(tmp_path, "fleetops")
    run = fleetops("run", "pb.yml", "-i", "inv.yml", "--json", "--results", tmp_path / "runs", *mode, cwd=f)
    assert run.returncode == 0, run.stderr
    got = [_outcome({"ignored": "failed"}.get(r["status"], r["status"]), r["result"], fd, True)
           for t in json.loads(run.stdout)["plays"][0]["tasks"] for r in [t["results"]["h1"]]]
    assert got == want
    assert _disk(fd) == _disk(ad)
    if not mode:
        assert [g["status"] for g in got] == ["changed", "ok", "failed", "changed", "changed", "ok", "ok", "failed"]
    assert all((g["diff"] is not None) == ("--diff" in mode) for g in got[:2] if g["changed"])
    if "--check" in mode:
        assert got[-1]["msg"] == "remote module (expect) does not support check mode"
