"""`file` and `tempfile`, compared with ansible-playbook on the same files, with and without
--check: nested directories, recursive symbolic modes (X, o-rwx), touch and its preserved times,
explicit modification times, hard links, a link followed to its target, absent trees, and the
refusals (a missing file, a file where a directory is asked, recurse or src with the wrong state,
a hard link over another file); every `changed`, every failure message, and what is left on disk
(each entry's type, mode and, where a task set it, mtime)."""
from __future__ import annotations

import json
import os
import re
import stat
import time

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"
TASKS = [
    ("nested dirs", "file", "{path: '@D@/a/b/c', state: directory, mode: '0750'}"),
    ("nested dirs again", "file", "{path: '@D@/a/b/c', state: directory, mode: '0750'}"),
    ("recurse symbolic", "file", "{path: '@D@/tree', state: directory, recurse: true, mode: 'u=rwX,g=rX,o-rwx'}"),
    ("recurse again", "file", "{path: '@D@/tree', state: directory, recurse: true, mode: 'u=rwX,g=rX,o-rwx'}"),
    ("touch new", "file", "{path: '@D@/touched', state: touch, mode: '0640'}"),
    ("touch preserving", "file",
     "{path: '@D@/touched', state: touch, modification_time: preserve, access_time: preserve}"),
    ("touch, no parent", "file", "{path: '@D@/nodir/x', state: touch}"),
    ("file missing", "file", "{path: '@D@/nosuch', state: file}"),
    ("file symbolic", "file", "{path: '@D@/target', state: file, mode: 'a-x,u+x,g=r'}"),
    ("file mtime", "file", "{path: '@D@/target', modification_time: '202001011200.00'}"),
    ("file mtime again", "file", "{path: '@D@/target', modification_time: '202001011200.00'}"),
    ("follow a link", "file", "{path: '@D@/sl', mode: '0604'}"),
    ("hard new", "file", "{src: '@D@/target', dest: '@D@/h1', state: hard}"),
    ("hard again", "file", "{src: '@D@/target', dest: '@D@/h1', state: hard}"),
    ("hard over a file", "file", "{src: '@D@/target', dest: '@D@/other', state: hard}"),
    ("directory over a file", "file", "{path: '@D@/other', state: directory}"),
    ("recurse, wrong state", "file", "{path: '@D@/other', state: file, recurse: true}"),
    ("src, wrong state", "file", "{path: '@D@/other', state: file, src: '@D@/target'}"),
    ("tempdir", "tempfile", "{state: directory, path: '@D@', prefix: tmp., suffix: .d}"),
    ("tempdir gone", "file", "{path: '{{ out.path }}', state: absent}\n      when: out.path is defined"),
    ("tempfile", "tempfile", "{path: '@D@', suffix: .t}"),
    ("tempfile gone", "file", "{path: '{{ out.path }}', state: absent}\n      when: out.path is defined"),
    ("absent tree", "file", "{path: '@D@/tree', state: absent}"),
    ("absent again", "file", "{path: '@D@/tree', state: absent}"),
]
PLAYBOOK = "- hosts: h1\n  gather_facts: false\n  tasks:\n" + "".join(
    f"    - name: {name}\n      {module}: {args}\n      register: out\n      ignore_errors: true\n"
    for name, module, args in TASKS)


def _project(root, who):
    d = root / who / "files"
    (d / "tree" / "sub").mkdir(parents=True)
    for name in ("target", "other", "tree/x", "tree/sub/y"):
        (d / name).write_text(name)
        os.chmod(d / name, 0o755 if name == "target" else 0o644)
    os.chmod(d / "tree", 0o777)
    os.symlink("target", d / "sl")
    (root / who / "inv.yml").write_text(INVENTORY)
    (root / who / "pb.yml").write_text(PLAYBOOK.replace("@D@", str(d)))
    return root / who, d


def _disk(d) -> dict:
    """Every entry under d: its type and mode, and whether the task's mtime was set."""
    out = {}
    for root, dirs, files in os.walk(d):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            kind = "link" if stat.S_ISLNK(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "file"
            out[os.path.relpath(p, d)] = (kind, oct(stat.S_IMODE(st.st_mode)) if kind != "link" else None,
                                          st.st_nlink if kind == "file" else None)
    out["target mtime set"] = int(os.stat(d / "target").st_mtime) == int(time.mktime(time.strptime(
        "202001011200.00", "%Y%m%d%H%M.%S")))
    return out


def _ansible(a, check) -> list:
    p = oracle.run("ansible-playbook", "-v", "-i", "inv.yml", "pb.yml", *(["--check"] if check else []), cwd=str(a),
                   env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_CALLBACK_FORMAT_PRETTY": "False"})
    assert p.returncode == 0, p.stdout[-2000:]
    want = []
    for line in p.stdout.splitlines():
        if line.startswith(("ok: [h1]", "changed: [h1]", "fatal: [h1]", "skipping: [h1]")):
            res = json.loads(line.split(" => ", 1)[1])
            failed = line.startswith("fatal:")
            skipped = line.startswith("skipping:")   # the callback drops `skipped` from what it prints
            want.append((failed, bool(res.get("changed")), skipped, res.get("msg") if failed else None))
    return want


@pytest.mark.parametrize("check", [False, True], ids=["run", "check"])
def test_file_and_tempfile_as_ansible_core(tmp_path, check):
    a, ad = _project(tmp_path, "ansible")
    want = _ansible(a, check)
    f, fd = _project(tmp_path, "fleetops")
    run = fleetops("run", "pb.yml", "-i", "inv.yml", "--json", "--results", tmp_path / "runs",
                   *(["--check"] if check else []), cwd=f)
    assert run.returncode == 0, run.stderr
    got = [(r.get("failed", False), bool(r.get("changed")), bool(r.get("skipped")), r["msg"] if r.get("failed") else None)
           for t in json.loads(run.stdout)["plays"][0]["tasks"] for r in [t["results"]["h1"]["result"]]]
    got = [(fl, ch, sk, m.replace(str(fd), str(ad)) if m else m) for fl, ch, sk, m in got]
    names = [name for name, _, _ in TASKS]
    # ansible-core's "could not touch target." leaves the OS error to its traceback; fleetops says it
    got = [(fl, ch, sk, m and re.sub(r"^(Error, could not touch target): \[Errno \d+\] .+$", r"\1.", m))
           for fl, ch, sk, m in got]
    assert dict(zip(names, got)) == dict(zip(names, want))
    assert _disk(fd) == _disk(ad)
