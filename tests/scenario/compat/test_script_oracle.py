"""`script`, compared with ansible-playbook on the local connection, with and without --check:
arguments (one with spaces), a failing script, `creates`/`removes` that skip and that run, an
absolute and a relative `chdir`, `executable`, a script that is not there; each result's
`changed`/`failed`/`skipped`, its `msg` when failed or skipped, `rc`, `stdout_lines`, and the
files the scripts made."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"
SCRIPTS = {
    "args.sh": "#!/bin/sh\nfor a in \"$@\"; do echo \"[$a]\"; done\npwd\n",
    "fail.sh": "#!/bin/sh\necho before\nexit 3\n",
    "touch.sh": "#!/bin/sh\ntouch \"$1\"\necho made\n",
    "py.txt": "import sys\nprint('python', len(sys.argv))\n",
}
TASKS = [
    ("args", "script: args.sh one 'two words' three"),
    ("failing", "script: fail.sh"),
    ("creates, exists", "script: touch.sh @D@/made\n      args: {creates: @D@/existing}"),
    ("creates, runs", "script: touch.sh @D@/made\n      args: {creates: @D@/made}"),
    ("removes, missing", "script: touch.sh @D@/made2\n      args: {removes: @D@/nosuch}"),
    ("removes, runs", "script: touch.sh @D@/made3\n      args: {removes: @D@/existing}"),
    ("chdir", "script: args.sh\n      args: {chdir: @D@}"),
    ("relative chdir", "script: args.sh\n      args: {chdir: somewhere}"),
    ("executable", "script: py.txt a b\n      args: {executable: '@PY@'}"),
    ("missing", "script: nosuch.sh"),
]
PLAYBOOK = "- hosts: h1\n  gather_facts: false\n  tasks:\n" + "".join(
    f"    - name: {name}\n      {body}\n      ignore_errors: true\n" for name, body in TASKS)


def _project(root, who):
    d = root / who
    (d / "files").mkdir(parents=True)
    (d / "out").mkdir()
    (d / "out" / "existing").write_text("")
    for name, text in SCRIPTS.items():
        (d / "files" / name).write_text(text)
    (d / "inv.yml").write_text(INVENTORY)
    (d / "pb.yml").write_text(PLAYBOOK.replace("@D@", str(d / "out")).replace("@PY@", shutil.which("python3")))
    return d


def _outcome(res: dict, line: str, d) -> tuple:
    failed = line.startswith("fatal:") if line else bool(res.get("failed"))
    skipped = line.startswith("skipping:") if line else bool(res.get("skipped"))
    msg = res.get("msg") if failed or skipped else None
    if msg:     # ansible-core goes on over more lines (where it searched); fleetops' failure is one line
        msg = msg.split("\n")[0].replace(" on the Ansible Controller.", "").replace(str(d), "D")
    return (failed, bool(res.get("changed")), skipped, msg, res.get("rc"),
            [x.replace(str(d), "D").replace(str(d.parent), "P") for x in res.get("stdout_lines") or []])


@pytest.mark.parametrize("check", [False, True], ids=["run", "check"])
def test_script_as_ansible_core(tmp_path, check):
    flags = ["--check"] if check else []
    a = _project(tmp_path, "ansible")
    p = oracle.run("ansible-playbook", "-v", "-i", "inv.yml", "pb.yml", *flags, cwd=str(a),
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False"})
    assert p.returncode == 0, p.stdout[-2000:]
    want = [_outcome(json.loads(line.split(" => ", 1)[1]), line, a / "out") for line in p.stdout.splitlines()
            if line.startswith(("ok: [h1]", "changed: [h1]", "fatal: [h1]", "skipping: [h1]"))]
    f = _project(tmp_path, "fleetops")
    run = fleetops("run", "pb.yml", "-i", "inv.yml", "--json", "--results", tmp_path / "runs", *flags, cwd=f)
    assert run.returncode == 0, run.stderr
    got = [_outcome(t["results"]["h1"]["result"], "", f / "out") for t in json.loads(run.stdout)["plays"][0]["tasks"]]
    names = [name for name, _ in TASKS]
    assert dict(zip(names, got)) == dict(zip(names, want))
    assert sorted(os.listdir(f / "out")) == sorted(os.listdir(a / "out"))
    if not check:
        assert want[0][5][:3] == ["[one]", "[two words]", "[three]"] and want[1][4] == 3
