"""The file system of a mixed host: an overlay of a cached foreign root with /proc, a tiny /dev
and devpts, every mount recorded in the host record at once so `down` can undo a half-done `up`."""
from __future__ import annotations

import os
import re
import stat
import subprocess

from fleetops.lab.errors import LabError


def mountpoints() -> list[str]:
    """Mount points from /proc/self/mountinfo (octal escapes decoded), in mount order."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            out.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), mp))
    return out


def mount(h: dict, target: str, args: list[str]) -> None:
    """mount(8) and record the mount point at once, so `down` can undo a half-done `up`."""
    if target in mountpoints():
        if target not in h["mounts"]:
            h["mounts"].append(target)
        return
    r = subprocess.run(["mount", *args, target], capture_output=True, text=True)
    if r.returncode != 0:
        raise LabError(f"lab host {h['name']}: mount {' '.join(args)} {target} failed: {r.stderr.strip()}")
    if target not in h["mounts"]:
        h["mounts"].append(target)


def mount_root(h: dict, hdir: str, log) -> None:
    """Overlay of the cached root h["lower"] at hdir/root (changes stay in this lab), plus /proc, a
    tiny /dev, devpts; `log` reports the slow fallback of copying the root."""
    root = os.path.join(hdir, "root")
    h["root"] = root
    h.setdefault("mounts", [])
    for d in ("upper", "work", "root"):
        os.makedirs(os.path.join(hdir, d), mode=0o755, exist_ok=True)
    if root not in mountpoints() and not h.get("copied"):
        opts = f"lowerdir={h['lower']},upperdir={hdir}/upper,workdir={hdir}/work"
        try:
            mount(h, root, ["-t", "overlay", "overlay", "-o", opts])
        except LabError as exc:
            # no overlayfs here (e.g. the state dir is itself on an overlay): a private copy
            log(f"{exc}; copying the root instead (slower, ~200 MB)")
            subprocess.run(["cp", "-a", "--reflink=auto", h["lower"] + "/.", root], check=True)
            h["copied"] = True
    mount(h, f"{root}/proc", ["-t", "proc", "proc"])
    dev = f"{root}/dev"
    fresh_dev = dev not in mountpoints()
    mount(h, dev, ["-t", "tmpfs", "-o", "mode=0755,size=1m,nosuid,noexec", "tmpfs"])
    if fresh_dev:
        for name, minor_major, mode in (("null", (1, 3), 0o666), ("zero", (1, 5), 0o666),
                                        ("full", (1, 7), 0o666), ("random", (1, 8), 0o666),
                                        ("urandom", (1, 9), 0o666), ("tty", (5, 0), 0o666)):
            os.mknod(f"{dev}/{name}", mode | stat.S_IFCHR, os.makedev(*minor_major))
            os.chmod(f"{dev}/{name}", mode)
        os.makedirs(f"{dev}/pts", mode=0o755)
        os.makedirs(f"{dev}/shm", mode=0o1777)
        os.chmod(f"{dev}/shm", 0o1777)
        for name, target in (("ptmx", "pts/ptmx"), ("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                             ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
            os.symlink(target, f"{dev}/{name}")
    mount(h, f"{dev}/pts", ["-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=0620,gid=5",
                                  "devpts"])


def unmount_root(h: dict) -> None:
    """Unmount exactly the recorded mounts, innermost first (lazily if something still holds one)."""
    mounts = h.get("mounts") or []
    for target in sorted(mounts, key=len, reverse=True):
        if target in mountpoints():
            r = subprocess.run(["umount", target], capture_output=True)
            if r.returncode != 0:
                subprocess.run(["umount", "-l", target], capture_output=True)
        if target not in mountpoints():
            mounts.remove(target)
    h["mounts"] = mounts
