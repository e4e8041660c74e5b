"""Host-side module payloads against ansible-core's own modules, run on the same files.

ansible-core 2.19's module (`python -m ansible.modules.NAME ARGS.json`, the way its own test
harness runs one) and fleetops' payload each get a fresh copy of the same file and the same
arguments; their `changed`, `msg`, failure, the file's bytes and mode afterwards, and the shape
of what they return must agree.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from fleetops.remote.host import lineinfile as fo_lineinfile
from fleetops.remote.host import stat as fo_stat
from tests.support import oracle

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")


def ansible_module(name: str, args: dict, tmp_path, check: bool = False) -> dict:
    spec = tmp_path / f"{name}-args.json"
    spec.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {**args, "_ansible_check_mode": check}}))
    p = subprocess.run([sys.executable, "-m", f"ansible.modules.{name}", str(spec)], capture_output=True,
                       text=True, timeout=60, cwd=str(tmp_path))
    return json.loads(p.stdout)


CONF = "# settings\nListenAddress 0.0.0.0\n#Port 22\nPermitRootLogin yes\nPasswordAuthentication yes\n"
LINEINFILE = [
    ("replace by regexp", CONF, {"regexp": "^PermitRootLogin", "line": "PermitRootLogin no"}),
    ("already so", CONF, {"regexp": "^PermitRootLogin", "line": "PermitRootLogin yes"}),
    ("add at EOF", CONF, {"line": "UseDNS no"}),
    ("exact line present", CONF, {"line": "ListenAddress 0.0.0.0"}),
    ("regexp misses, line present", CONF, {"regexp": "^Nope", "line": "ListenAddress 0.0.0.0"}),
    ("insertafter regex", CONF, {"line": "Port 2222", "insertafter": "^#Port"}),
    ("insertafter regex already there", "a\nb\nc\n", {"line": "b", "insertafter": "^a"}),
    ("insertbefore regex", CONF, {"line": "Port 2222", "insertbefore": "^PermitRootLogin"}),
    ("insertbefore BOF", CONF, {"line": "# managed", "insertbefore": "BOF"}),
    ("insertafter no match: EOF", CONF, {"line": "X 1", "insertafter": "^Nothing"}),
    ("firstmatch", "x=1\nx=2\n", {"regexp": "^x=", "line": "x=9", "firstmatch": True}),
    ("last match by default", "x=1\nx=2\n", {"regexp": "^x=", "line": "x=9"}),
    ("backrefs", "port = 80\n", {"regexp": r"^port = (\d+)$", "line": r"port = \g<1>80", "backrefs": True}),
    ("backrefs no match adds nothing", "a\n", {"regexp": "^zzz(.*)", "line": r"\1", "backrefs": True}),
    ("search_string", CONF, {"search_string": "Password", "line": "PasswordAuthentication no"}),
    ("no newline at end", "a\nb", {"line": "c"}),
    ("empty file", "", {"line": "first"}),
    ("CRLF file, replace", "a=1\r\nb=2\r\n", {"regexp": "^a=", "line": "a=5"}),
    ("CRLF file, exact line", "a=1\r\nb=2\r\n", {"line": "b=2"}),
    ("templated-looking text kept", CONF, {"line": "X {{ not_a_template }} $HOME ~"}),
    ("absent by regexp", CONF, {"regexp": "^#", "state": "absent"}),
    ("absent by line", CONF, {"line": "PermitRootLogin yes", "state": "absent"}),
    ("absent, nothing there", CONF, {"line": "zzz", "state": "absent"}),
    ("absent by search_string", CONF, {"search_string": "Address", "state": "absent"}),
    ("backup", CONF, {"regexp": "^Permit", "line": "PermitRootLogin no", "backup": True}),
    ("mode only", CONF, {"line": "ListenAddress 0.0.0.0", "mode": "0640"}),
    ("missing file", None, {"line": "x"}),
    ("missing file, create", None, {"line": "x", "create": True}),
    ("absent from missing file", None, {"line": "x", "state": "absent"}),
    ("no line with present", CONF, {"regexp": "^x"}),
    ("backrefs without regexp", CONF, {"line": "x", "backrefs": True, "search_string": "a"}),
    ("validate passes", CONF, {"line": "UseDNS no", "validate": "grep -q UseDNS %s"}),
    ("validate fails", CONF, {"line": "UseDNS no", "validate": "grep -q NotThere %s"}),
]


def _run_both(tmp_path, content, args, check=False):
    out = {}
    for who in ("ansible", "fleetops"):
        d = tmp_path / who
        d.mkdir()
        path = d / "sshd_config"
        if content is not None:
            path.write_bytes(content.encode())
            path.chmod(0o644)
        full = {**args, "path": str(path)}
        if who == "ansible":
            res = ansible_module("lineinfile", full, tmp_path, check)
        else:
            res = fo_lineinfile.main({**full, "_check": check})
        after = path.read_bytes() if path.exists() else None
        mode = stat.S_IMODE(path.stat().st_mode) if path.exists() and content is not None else None
        backups = sorted(p.name.split(".")[0] for p in d.iterdir() if p.name.endswith("~"))
        out[who] = {"changed": bool(res.get("changed")), "failed": bool(res.get("failed")),
                    "msg": (res.get("msg") or "").replace(str(d), "DIR"), "found": res.get("found"), "content": after, "mode": mode,
                    "backup": bool(res.get("backup")), "backups": backups}
    return out


@pytest.mark.parametrize("case", LINEINFILE, ids=[c[0] for c in LINEINFILE])
def test_lineinfile_as_ansible_core(case, tmp_path):
    _, content, args = case
    got = _run_both(tmp_path, content, args)
    assert got["fleetops"] == got["ansible"]


@pytest.mark.parametrize("case", LINEINFILE[:6], ids=[c[0] for c in LINEINFILE[:6]])
def test_lineinfile_check_mode_as_ansible_core(case, tmp_path):
    _, content, args = case
    got = _run_both(tmp_path, content, args, check=True)
    assert got["fleetops"] == got["ansible"]
    assert got["fleetops"]["content"] == (content.encode() if content is not None else None)


# what ansible.builtin.stat returns that fleetops does not (README): SELinux/ext attributes
NOT_REPORTED = {"attributes", "attr_flags", "version"}


def _stat_targets(tmp_path):
    (tmp_path / "f.txt").write_text("hello\n")
    (tmp_path / "f.txt").chmod(0o640)
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "f.txt")
    (tmp_path / "bin.dat").write_bytes(bytes(range(256)))
    (tmp_path / "bin.dat").chmod(0o4755)
    os.mkfifo(tmp_path / "fifo")
    return ["f.txt", "d", "link", "bin.dat", "fifo", "missing", "f.txt/below"]


@pytest.mark.parametrize("follow", [False, True])
@pytest.mark.parametrize("algorithm", ["sha1", "sha256"])
def test_stat_as_ansible_core(tmp_path, follow, algorithm):
    for name in _stat_targets(tmp_path):
        args = {"path": str(tmp_path / name), "follow": follow, "checksum_algorithm": algorithm}
        want = ansible_module("stat", args, tmp_path)
        got = fo_stat.main(args)
        if want.get("failed"):
            assert got["failed"] and got["msg"] == want["msg"], name
            continue
        assert got["changed"] is False and not got["failed"], got
        want_stat = {k: v for k, v in want["stat"].items() if k not in NOT_REPORTED}
        got_stat = dict(got["stat"])
        for t in ("atime", "mtime", "ctime"):        # reading the file for its checksum moves atime
            assert (t in got_stat) == (t in want_stat), name
            got_stat.pop(t, None), want_stat.pop(t, None)
        assert got_stat == want_stat, name


def test_stat_without_checksum_or_mime(tmp_path):
    (tmp_path / "f").write_text("x")
    args = {"path": str(tmp_path / "f"), "get_checksum": False, "get_mime": False}
    want = ansible_module("stat", args, tmp_path)["stat"]
    got = fo_stat.main(args)["stat"]
    assert set(got) == set(want) - NOT_REPORTED
