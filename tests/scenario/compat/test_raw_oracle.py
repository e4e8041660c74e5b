"""`raw`, compared with ansible-playbook on the local connection, with and without --check: a
plain line, a pipe, a line under another shell (`executable`), a failing one; each result's
`changed`/`failed`/`skipped`, `msg` when failed, `rc` and `stdout_lines`; and beside it
`command`'s `executable` (accepted and ignored, as ansible-core) and a command with none."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"
TASKS = [
    ("plain", "raw: echo hello"),
    ("pipe", "raw: \"echo 'foo,bar,baz' | cut -d, -f2 | tr b c\""),
    ("another shell", "raw: echo $0\n      args: {executable: '@BASH@'}"),
    ("failing", "raw: echo out; echo err >&2; exit 3"),
    ("command executable", "command: echo $0\n      args: {executable: /bogus}"),
    ("command without one", "command:\n      args: {chdir: /}"),
    ("command, creates absent", "command: echo hi\n      args: {creates: /nosuch}"),
]
PLAYBOOK = "- hosts: h1\n  gather_facts: false\n  tasks:\n" + "".join(
    f"    - name: {name}\n      {body}\n      ignore_errors: true\n" for name, body in TASKS)


def _outcome(res: dict, line: str) -> tuple:
    failed = line.startswith("fatal:") if line else bool(res.get("failed"))
    skipped = line.startswith("skipping:") if line else bool(res.get("skipped"))
    return (failed, bool(res.get("changed")), skipped, res.get("msg") if failed else None, res.get("rc"),
            [x.strip() for x in res.get("stdout_lines") or []])


@pytest.mark.parametrize("check", [False, True], ids=["run", "check"])
def test_raw_as_ansible_core(tmp_path, check):
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "pb.yml").write_text(PLAYBOOK.replace("@BASH@", shutil.which("bash")))
    flags = ["--check"] if check else []
    p = oracle.run("ansible-playbook", "-v", "-i", "inv.yml", "pb.yml", *flags, cwd=str(tmp_path),
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False"})
    assert p.returncode == 0, p.stdout[-2000:]
    want = [_outcome(json.loads(line.split(" => ", 1)[1]), line) for line in p.stdout.splitlines()
            if line.startswith(("ok: [h1]", "changed: [h1]", "fatal: [h1]", "skipping: [h1]"))]
    run = fleetops("run", "pb.yml", "-i", "inv.yml", "--json", "--results", tmp_path / "runs", *flags, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    got = [_outcome(t["results"]["h1"]["result"], "") for t in json.loads(run.stdout)["plays"][0]["tasks"]]
    names = [name for name, _ in TASKS]
    assert dict(zip(names, got)) == dict(zip(names, want))
    if not check:
        assert want[2][5] == [shutil.which("bash")] and want[3][4] == 3     # the cases say what they claim
