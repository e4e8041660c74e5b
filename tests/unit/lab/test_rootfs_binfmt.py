"""The mixed lab's binfmt_misc choice on a faked /proc/sys/fs/binfmt_misc tree: Debian's own
qemu-user-static entry (flags OPF, no C: setgid crontab fails under emulation) is left in place
and fleetops registers its own FC entry beside it; an entry with F and C is used as it is."""
from __future__ import annotations

import os
import re

import pytest

from fleetops.lab import rootfs

# /usr/lib/binfmt.d/qemu-aarch64.conf as Debian 12's qemu-user-static ships it
DEBIAN_AARCH64 = (r":qemu-aarch64:M::\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00"
                  r":\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff"
                  r":/usr/libexec/qemu-binfmt/aarch64-binfmt-P:OPF")
DEBIAN_CONF = "/usr/lib/binfmt.d/qemu-aarch64.conf"


def debian_line() -> str:
    """The machine's own copy of Debian's file when qemu-user-static is installed, else the copy above."""
    if os.path.isfile(DEBIAN_CONF):
        with open(DEBIAN_CONF) as f:
            lines = [x.strip() for x in f if x.strip() and not x.startswith("#")]
        return lines[0]
    return DEBIAN_AARCH64


def register(tree, line: str) -> str:
    """What the kernel does with a line written to `register`: an entry file as binfmt_misc shows
    it (flags in the kernel's order P, O, C, F; C implies O); returns the entry's name."""
    _, name, _kind, offset, magic, mask, interp, flags = line.split(":")
    flags = set(flags) | ({"O"} if "C" in flags else set())
    unhex = lambda s: "".join(re.findall(r"\\x([0-9a-f]{2})", s))  # noqa: E731
    shown = "".join(f for f in "POCF" if f in flags)
    (tree / name).write_text(f"enabled\ninterpreter {interp}\nflags: {shown}\noffset {offset or 0}\n"
                             f"magic {unhex(magic)}\nmask {unhex(mask)}\n")
    return name


@pytest.fixture
def tree(tmp_path, monkeypatch):
    d = tmp_path / "binfmt_misc"
    d.mkdir()
    (d / "register").write_text("")
    (d / "status").write_text("enabled\n")
    monkeypatch.setattr(rootfs, "BINFMT_DIR", str(d))
    monkeypatch.setattr(rootfs, "BINFMT_STATE", str(tmp_path / "state.json"))
    monkeypatch.setattr(rootfs, "BINFMT_LOCK", str(tmp_path / "state.lock"))
    monkeypatch.setattr(rootfs, "_qemu_static", lambda machine: f"/usr/bin/qemu-{machine}-static")
    return d


def written(tree) -> str:
    return (tree / "register").read_text()


def test_debians_default_entry_without_c_gets_fleetops_entry_beside_it(tree):
    debian = register(tree, debian_line())
    assert "C" not in (tree / debian).read_text().split("flags: ")[1].split()[0]
    rec = rootfs.binfmt_acquire("aarch64", "lab-a")
    line = written(tree)
    assert line.startswith(":fleetops-aarch64:M::") and line.endswith(":/usr/bin/qemu-aarch64-static:FC")
    assert rec == {"owners": ["lab-a"], "registered": "fleetops-aarch64"}
    register(tree, line)                                  # the kernel now has both
    (tree / "register").write_text("")
    assert rootfs.binfmt_acquire("aarch64", "lab-b")["owners"] == ["lab-a", "lab-b"] and written(tree) == ""
    rootfs.binfmt_release("aarch64", "lab-a")
    rootfs.binfmt_release("aarch64", "lab-b")
    assert (tree / "fleetops-aarch64").read_text() == "-1"   # ours unregistered by the last lab
    assert "enabled" in (tree / debian).read_text()            # the distribution's is left as it was


@pytest.mark.parametrize("flags, reused", [("F", False), ("OF", False), ("PF", False), ("C", False),
                                           ("FC", True), ("POCF", True)])
def test_an_entry_is_used_as_it_is_only_with_f_and_c(tree, flags, reused):
    name = register(tree, debian_line().replace(":qemu-aarch64:", ":by-hand:").rsplit(":", 1)[0] + ":" + flags)
    rootfs.binfmt_acquire("aarch64", "lab")
    assert (written(tree) == "") == reused
    assert rootfs._usable_entry("aarch64", str(tree)) == (name if reused else None)


def test_an_fc_entry_beside_one_without_c_is_not_enough(tree):
    """Which of two matching entries the kernel uses cannot be read from binfmt_misc."""
    register(tree, debian_line())
    register(tree, debian_line().replace(":qemu-aarch64:", ":by-hand:").replace(":OPF", ":FC"))
    assert rootfs._usable_entry("aarch64", str(tree)) is None
    rootfs.binfmt_acquire("aarch64", "lab")
    assert written(tree).startswith(":fleetops-aarch64:")


def test_a_left_over_fleetops_entry_is_taken_over(tree):
    register(tree, debian_line())
    register(tree, f":fleetops-aarch64:M::{rootfs.QEMU['aarch64'][0]}:{rootfs.QEMU['aarch64'][1]}:"
                   "/usr/bin/qemu-aarch64-static:FC")
    assert rootfs.binfmt_acquire("aarch64", "lab")["registered"] == "fleetops-aarch64" and written(tree) == ""


def test_an_entry_for_another_machine_does_not_count(tree):
    register(tree, debian_line().replace(r"\x02\x00\xb7\x00:", r"\x02\x00\x3e\x00:", 1)
             .replace(":qemu-aarch64:", ":x86:").replace(":OPF", ":FC"))
    assert rootfs._usable_entry("aarch64", str(tree)) is None


def test_when_registering_fails_the_error_says_what_is_wrong_and_what_to_do(tree):
    register(tree, debian_line())
    os.remove(tree / "register")
    (tree / "register").mkdir()                           # writing it fails, as without privilege
    with pytest.raises(rootfs.RootfsError) as info:
        rootfs.binfmt_acquire("aarch64", "lab")
    msg = str(info.value)
    assert "flags F and C" in msg and "qemu-aarch64 (flags POF)" in msg and "echo -1 >" in msg
