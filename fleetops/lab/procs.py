"""The lab's sshd processes seen through /proc: finding sshd, free ports, proving a PID is
one of ours (PIDs get recycled), the sessions below a chrooted one, and the SSH banner."""
from __future__ import annotations

import os
import shutil
import socket

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")


def sshd_path() -> str | None:
    for p in SSHD_CANDIDATES:
        if os.access(p, os.X_OK):
            return p
    return shutil.which("sshd")


def free_port(avoid: set) -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port


def proc_cmdline(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # state is the field after the parenthesised comm; a zombie is already dead
    state = stat.rsplit(b")", 1)[-1].split()[0:1]
    if state == [b"Z"]:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def is_lab_sshd(pid: int | None, config: str, root: str | None = None) -> bool:
    """True only if PID is a live sshd started with `-f config` (guards against recycled PIDs).

    sshd rewrites its title to one string ("sshd: /usr/sbin/sshd -D -f CFG ... [listener] ..."),
    so both the argv form and the title form are accepted. With `root` (a mixed host), the
    process must also be chrooted there; an emulated sshd shows as qemu running it.
    """
    if not pid or not config:
        return False
    argv = proc_cmdline(int(pid))
    if not argv:
        return False
    if root is not None:
        try:
            if os.readlink(f"/proc/{int(pid)}/root") != os.path.realpath(root):
                return False
        except OSError:
            return False
    try:
        exe = os.path.basename(os.readlink(f"/proc/{int(pid)}/exe"))
    except OSError:
        exe = os.path.basename(argv[0])
    if exe.startswith("qemu-") and root is not None and len(argv) > 1:
        argv = argv[1:]                       # binfmt_misc: [qemu, /usr/sbin/sshd, args...]
        exe = os.path.basename(argv[0])
    if not exe.startswith("sshd"):
        return False
    for i, a in enumerate(argv[:-1]):
        if a == "-f" and argv[i + 1] == config:
            return True
    return len(argv) == 1 and argv[0].startswith("sshd: ") and f" -f {config} " in argv[0] + " "


def read_text(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


def reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def root_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{int(pid)}/root")
    except OSError:
        return None


def descendants(pid: int, root: str) -> list[int]:
    """PIDs below `pid` (sessions a chrooted sshd spawned) that are still chrooted in `root`."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[-1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    real = os.path.realpath(root)
    out, todo = [], list(children.get(int(pid), []))
    while todo:
        c = todo.pop()
        if root_of(c) == real:
            out.append(c)
        todo.extend(children.get(c, []))
    return out


def banner(port: int) -> bool:
    """True once something on 127.0.0.1:port answers with an SSH banner."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.settimeout(2)
            return s.recv(64).startswith(b"SSH-")
    except OSError:
        return False
