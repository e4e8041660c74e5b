"""The lab's Unix users: one per host, with its own home and the lab key authorised.

Native hosts get real users of this machine (useradd, serialised across labs by a global lock);
mixed hosts get users written into their root's own passwd/group/shadow, since useradd of this
machine cannot run for another architecture.
"""
from __future__ import annotations

import fcntl
import os
import pwd
import shutil
import subprocess
from contextlib import contextmanager

from fleetops.lab.errors import LabError
from fleetops.lab.procs import read_text

GLOBAL_LOCK = "/run/fleetops-lab.lock"   # serialises useradd/authorized_keys edits across labs


@contextmanager
def global_lock():
    with open(GLOBAL_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def shadow_locked(user: str) -> bool:
    try:
        with open("/etc/shadow") as f:
            for line in f:
                parts = line.split(":")
                if parts[0] == user:
                    return parts[1].startswith("!") or parts[1] == ""
    except OSError:
        pass
    return True


def ensure_native_user(user: str, pub: str) -> str:
    """User `user` (key-usable, own home) with `pub` in its authorized_keys; returns the home."""
    with global_lock():
        try:
            pw = pwd.getpwnam(user)
        except KeyError:
            r = subprocess.run(["useradd", "-m", "-s", "/bin/bash", user], capture_output=True, text=True)
            if r.returncode not in (0, 9):      # 9: exists (created meanwhile)
                raise LabError(f"useradd {user} failed: {r.stderr.strip()}") from None
            pw = pwd.getpwnam(user)
        if shadow_locked(user):
            subprocess.run(["usermod", "-p", "*", user], check=True, capture_output=True)
        if not os.path.isdir(pw.pw_dir):
            os.makedirs(pw.pw_dir, mode=0o755)
            os.chown(pw.pw_dir, pw.pw_uid, pw.pw_gid)
        sshdir = os.path.join(pw.pw_dir, ".ssh")
        os.makedirs(sshdir, exist_ok=True)
        os.chown(sshdir, pw.pw_uid, pw.pw_gid)
        os.chmod(sshdir, 0o700)
        ak = os.path.join(sshdir, "authorized_keys")
        lines = read_text(ak).splitlines() if os.path.exists(ak) else []
        if pub not in lines:
            lines.append(pub)
            with open(ak, "w") as f:
                f.write("\n".join(lines) + "\n")
        os.chown(ak, pw.pw_uid, pw.pw_gid)
        os.chmod(ak, 0o600)
    return pw.pw_dir


def remove_authorized_key(home: str | None, pub: str) -> None:
    if not home:
        return
    ak = os.path.join(home, ".ssh", "authorized_keys")
    with global_lock():
        try:
            lines = read_text(ak).splitlines()
        except OSError:
            return
        if pub in lines:
            with open(ak, "w") as f:
                f.write("".join(x + "\n" for x in lines if x != pub))


def foreign_user(root: str, user: str) -> tuple[int, int]:
    """Add `user` to the root's own passwd/group/shadow (no useradd: it may be another arch)."""
    def lines(rel):
        try:
            return read_text(os.path.join(root, rel)).splitlines()
        except FileNotFoundError:
            return []

    passwd = lines("etc/passwd")
    for line in passwd:
        f = line.split(":")
        if f[0] == user:
            uid, gid = int(f[2]), int(f[3])
            break
    else:
        used = {int(x.split(":")[2]) for x in passwd if x.count(":") >= 3} | {
            int(x.split(":")[2]) for x in lines("etc/group") if x.count(":") >= 3}
        uid = next(i for i in range(1000, 60000) if i not in used)
        gid = uid
        for rel, line in (("etc/passwd", f"{user}:x:{uid}:{gid}::/home/{user}:/bin/bash"),
                          ("etc/group", f"{user}:x:{gid}:"),
                          ("etc/shadow", f"{user}:*:19000:0:99999:7:::")):   # '*': no password, not locked
            with open(os.path.join(root, rel), "a") as f:
                f.write(line + "\n")
    home = os.path.join(root, "home", user)
    if not os.path.isdir(home):
        shutil.copytree(os.path.join(root, "etc/skel"), home, symlinks=True)
        for dirpath, dirs, files in os.walk(home):
            for x in [dirpath] + [os.path.join(dirpath, y) for y in dirs + files]:
                os.lchown(x, uid, gid)
        os.chmod(home, 0o755)
    return uid, gid


def authorize_in_root(home: str, uid: int, gid: int, pub: str) -> None:
    """The lab key in a mixed host user's authorized_keys, inside that host's root."""
    sshdir = os.path.join(home, ".ssh")
    os.makedirs(sshdir, exist_ok=True)
    os.chown(sshdir, uid, gid)
    os.chmod(sshdir, 0o700)
    ak = os.path.join(sshdir, "authorized_keys")
    lines = read_text(ak).splitlines() if os.path.exists(ak) else []
    if pub not in lines:
        with open(ak, "w") as f:
            f.write("".join(x + "\n" for x in lines + [pub]))
    os.chown(ak, uid, gid)
    os.chmod(ak, 0o600)
