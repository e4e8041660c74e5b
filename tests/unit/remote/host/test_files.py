"""The host-side copy, file, fetch and wait_for payloads, imported locally (they are plain stdlib modules)."""
from __future__ import annotations

import base64
import os
import socket
import stat

from fleetops.remote.host import copy as host_copy
from fleetops.remote.host import fetch as host_fetch
from fleetops.remote.host import file as host_file
from fleetops.remote.host import wait_for


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def copy(dest, data: bytes, **kw):
    args = {"dest": str(dest), "content_b64": b64(data)}
    args.update(kw)
    return host_copy.main(args)


def test_copy_creates_0600_then_idempotent_then_updates_with_diff(tmp_path):
    dest = tmp_path / "conf"
    first = copy(dest, b"a\nb\n")
    assert first["changed"] and not first["failed"]
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o600 and dest.read_bytes() == b"a\nb\n"
    again = copy(dest, b"a\nb\n")
    assert not again["changed"] and again["msg"].startswith("unchanged")
    upd = copy(dest, b"a\nc\n", _diff=True)
    assert upd["changed"] and "-b\n" in upd["diff"] and "+c\n" in upd["diff"]
    assert dest.read_bytes() == b"a\nc\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".fleetops-")]   # no temp left


def test_copy_keeps_existing_mode_and_sets_given_mode(tmp_path):
    dest = tmp_path / "f"
    dest.write_text("old")
    os.chmod(dest, 0o640)
    copy(dest, b"new")
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o640
    res = copy(dest, b"new", mode="0644", _diff=True)
    assert res["changed"] and "mode: 0640" in res["diff"] and "mode: 0644" in res["diff"]
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o644
    assert not copy(dest, b"new", mode=0o644)["changed"]      # YAML 0644 arrives as int 420


def test_copy_check_mode_writes_nothing(tmp_path):
    dest = tmp_path / "f"
    res = copy(dest, b"x", _check=True, _diff=True)
    assert res["changed"] and res["msg"].startswith("would create") and not dest.exists()
    dest.write_bytes(b"y")
    res = copy(dest, b"x", _check=True)
    assert res["changed"] and dest.read_bytes() == b"y"


def test_copy_binary_diff_and_backup(tmp_path):
    dest = tmp_path / "bin"
    dest.write_bytes(b"\x00\x01")
    res = copy(dest, b"\x00\x02", _diff=True, backup=True)
    assert "Binary files" in res["diff"]
    assert os.path.exists(res["backup_file"]) and open(res["backup_file"], "rb").read() == b"\x00\x01"


def test_copy_into_directory_and_missing_parent(tmp_path):
    res = copy(str(tmp_path) + "/", b"x", basename="name.txt")
    assert res["changed"] and (tmp_path / "name.txt").read_bytes() == b"x"
    res = copy(tmp_path / "nope" / "f", b"x")
    assert res["failed"] and "does not exist" in res["msg"]


def test_file_states(tmp_path):
    d = tmp_path / "a" / "b"
    res = host_file.main({"path": str(d), "state": "directory", "_diff": True})
    assert res["changed"] and d.is_dir() and "+state: directory" in res["diff"]
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert not host_file.main({"path": str(d), "state": "directory"})["changed"]
    (d / "x").write_text("x")
    res = host_file.main({"path": str(d), "state": "absent", "_check": True})
    assert res["changed"] and d.exists()
    res = host_file.main({"path": str(d), "state": "absent"})   # as ansible-core: with its contents
    assert res["changed"] and not d.exists()
    assert not host_file.main({"path": str(d), "state": "absent"})["changed"]
    t = tmp_path / "t"
    assert host_file.main({"path": str(t), "state": "touch", "mode": "0644"})["changed"]
    assert stat.S_IMODE(os.stat(t).st_mode) == 0o644
    res = host_file.main({"path": str(t), "state": "file", "mode": "0600", "_check": True})
    assert res["changed"] and stat.S_IMODE(os.stat(t).st_mode) == 0o644
    assert host_file.main({"path": str(tmp_path / "missing"), "state": "file"})["failed"]


def test_bad_mode_is_a_clear_failure(tmp_path):
    res = copy(tmp_path / "f", b"x", mode="u+rwx")
    assert res["failed"] and "octal" in res["msg"]


def test_slurp(tmp_path):
    (tmp_path / "s").write_bytes(b"data")
    res = host_fetch.main({"src": str(tmp_path / "s")})
    assert base64.b64decode(res["content_b64"]) == b"data"
    assert host_fetch.main({"src": str(tmp_path / "none")})["missing"]


def test_wait_for_port_and_path(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(128)
    port = srv.getsockname()[1]
    try:
        res = wait_for.main({"port": port, "timeout": 5})
        assert not res["failed"], res
        res = wait_for.main({"port": port, "state": "stopped", "timeout": 0.3, "sleep": 0.1})
        assert res["failed"] and "timeout" in res["msg"]
    finally:
        srv.close()
    assert not wait_for.main({"port": port, "state": "stopped", "timeout": 5})["failed"]
    p = tmp_path / "flag"
    assert wait_for.main({"path": str(p), "state": "absent", "timeout": 1})["failed"] is False
    p.write_text("")
    assert wait_for.main({"path": str(p), "timeout": 1})["failed"] is False
