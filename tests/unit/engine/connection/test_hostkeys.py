"""known_hosts lookups: plain names found through the index (one line per host of a fleet),
hashed lines tried one by one, @revoked kept, other markers ignored, a recorded key seen."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os

from fleetops.engine.connection import hostkeys


def _blob(n: int) -> bytes:
    return b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + bytes([n]) * 32


def _line(names: str, n: int, marker: str = "") -> str:
    return (marker + " " if marker else "") + f"{names} ssh-ed25519 {base64.b64encode(_blob(n)).decode()}\n"


def _hashed(name: str, salt: bytes) -> str:
    mac = hmac.new(salt, name.encode(), hashlib.sha1).digest()
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(mac).decode()}"


def test_plain_hashed_revoked_and_other_markers(tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text("# comment\n" + _line("web1,10.0.0.1", 1) + _line("[10.0.0.2]:2222", 2)
                  + _line(_hashed("db1", b"saltsaltsaltsalt1234"), 3) + _line("*", 4, "@cert-authority")
                  + _line("web1", 5, "@revoked") + "garbage line\n" + _line("web1", 6))
    known, revoked = hostkeys.read_known_hosts(str(kh), "web1")
    assert known == [("ssh-ed25519", _blob(1)), ("ssh-ed25519", _blob(6))]
    assert revoked == [_blob(5)]
    assert hostkeys.read_known_hosts(str(kh), "10.0.0.1")[0] == [("ssh-ed25519", _blob(1))]
    assert hostkeys.read_known_hosts(str(kh), "[10.0.0.2]:2222")[0] == [("ssh-ed25519", _blob(2))]
    assert hostkeys.read_known_hosts(str(kh), "db1")[0] == [("ssh-ed25519", _blob(3))]
    assert hostkeys.read_known_hosts(str(kh), "db2")[0] == []
    assert hostkeys.read_known_hosts(str(tmp_path / "absent"), "web1") == ([], [])


def test_a_key_recorded_mid_run_is_seen(tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text("".join(_line(f"[127.0.0.1]:{2000 + i}", i % 200) for i in range(1000)))
    assert hostkeys.read_known_hosts(str(kh), "[127.0.0.1]:2999")[0] == [("ssh-ed25519", _blob(999 % 200))]
    assert hostkeys.read_known_hosts(str(kh), "[127.0.0.1]:3000")[0] == []
    hostkeys.record_new_key(str(kh), "[127.0.0.1]:3000", "ssh-ed25519", _blob(7), "SHA256:x")
    assert hostkeys.read_known_hosts(str(kh), "[127.0.0.1]:3000")[0] == [("ssh-ed25519", _blob(7))]
    assert oct(os.stat(kh).st_mode & 0o777) == "0o644"     # an existing file keeps its mode
