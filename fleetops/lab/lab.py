"""A local fleet of real OpenSSH servers, one Unix user, home and host key each.

Tests and demos need hosts that behave exactly like the field (real sshd, real
key auth, real known_hosts) without any VM: every simulated host is an
`sshd -D` on its own 127.0.0.1 port that only lets its own user in.
State lives in `state_dir/lab.json` so `down` kills exactly what `up` started.

Mixed hosts (`up(n, mixed="aarch64,oldstable")`: arm01, old01) are the same kind of
sshd, chrooted into an overlay of a cached Debian root (fleetops/lab/rootfs.py): real
fleets have aarch64 machines and older Pythons/SQLites, and payloads must be proven
there. Their users live only inside their root; `seed_file`/`seed_state_db` put test
data into those homes. `down` also ends their sessions and undoes their recorded mounts.
"""
from __future__ import annotations

import fcntl
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from contextlib import contextmanager

from fleetops.engine.connection.transport import ConnParams
from fleetops.errors import FleetopsError
from fleetops.lab import rootfs

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
GLOBAL_LOCK = "/run/fleetops-lab.lock"   # serialises useradd/authorized_keys edits across labs
BANNER_TIMEOUT = 20.0
EMULATED_CONNECT_TIMEOUT = 60.0   # seconds; an sshd under qemu on a loaded CI box is slow to kex
FOREIGN_SLOWDOWN = 9        # chrooted/emulated hosts may take this many times longer to answer
PORTS_PER_SSHD = 16         # sshd listens on at most 16 sockets (MAX_LISTEN_SOCKS)
OWN_SSHD_UP_TO = 64         # labs up to this size give every host its own sshd
# Hermes offline; and its live-system guard off: Hermes 0.20.1+ refuses to open ~/.hermes/state.db
# from a process with a pytest ancestor, which every session of a suite-started sshd has (the
# lab users' homes are the suite's own)
LAB_ENV = ("HERMES_DISABLE_LAZY_INSTALLS=1 TIRITH_ENABLED=0 "
           "HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 HERMES_STATE_DB_GUARD_BYPASS=1")


class LabError(FleetopsError):
    """The lab could not be brought up or down (not root, sshd missing, port trouble)."""

    exit_code = 1


def _sshd_path() -> str | None:
    for p in SSHD_CANDIDATES:
        if os.access(p, os.X_OK):
            return p
    return shutil.which("sshd")


def _free_port(avoid: set) -> int:
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port


def _proc_cmdline(pid: int) -> list[str] | None:
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
    argv = _proc_cmdline(int(pid))
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


def _read(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _root_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{int(pid)}/root")
    except OSError:
        return None


def _descendants(pid: int, root: str) -> list[int]:
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
        if _root_of(c) == real:
            out.append(c)
        todo.extend(children.get(c, []))
    return out


def _mountpoints() -> list[str]:
    """Mount points from /proc/self/mountinfo (octal escapes decoded), in mount order."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            out.append(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), mp))
    return out


class Lab:
    """N simulated hosts: `up(n)`, `down()`, `status()`; state in `state_dir/lab.json`."""

    _penalties_supported: bool | None = None

    def __init__(self, state_dir: str = "./fleetops-lab", prefix: str = "fleetlab"):
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,24}", prefix):
            raise LabError(f"lab prefix {prefix!r} must be a short lowercase Unix user name prefix")
        self.state_dir = os.path.abspath(state_dir)
        self.prefix = prefix
        self._procs: dict[int, subprocess.Popen] = {}

    # ---- paths -----------------------------------------------------------
    @property
    def json_path(self) -> str:
        return os.path.join(self.state_dir, "lab.json")

    @property
    def key_path(self) -> str:
        return os.path.join(self.state_dir, "id_ed25519")

    @property
    def known_hosts_path(self) -> str:
        return os.path.join(self.state_dir, "known_hosts")

    @property
    def inventory_path(self) -> str:
        return os.path.join(self.state_dir, "inventory.yml")

    @property
    def hosts(self) -> list[dict]:
        """Host records from lab.json: name, user, home, port, pid, config, host_key, log."""
        return self._load()["hosts"]

    # ---- public API --------------------------------------------------------
    def up(self, n: int, mixed=(), per_sshd: int | None = None) -> dict:
        """Start hosts 1..n (keeping those already running); returns the lab.json contents.

        `mixed` ("aarch64,oldstable" or a list) adds one chrooted host per kind (arm01, old01),
        building its root file system first if the cache has none (minutes, once per machine).
        `per_sshd`: how many native hosts share one sshd process (default 1 up to
        OWN_SSHD_UP_TO hosts, else PORTS_PER_SSHD). Hosts that share one still have their own
        port and Unix user, and each port lets only its own user in (`Match LocalPort`); they
        share the sshd's host key and its fate (killing it takes all of them down).
        """
        self._require_root()
        kinds = rootfs.kinds_from_spec(mixed)
        if n < 1 and not kinds:
            raise LabError("lab up needs at least 1 host")
        per = per_sshd or (1 if n <= OWN_SSHD_UP_TO else PORTS_PER_SSHD)
        if not 1 <= per <= PORTS_PER_SSHD:
            raise LabError(f"per_sshd must be 1..{PORTS_PER_SSHD} (sshd listens on at most that many ports)")
        sshd = self._ensure_sshd() if n >= 1 else None
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        os.makedirs(self.state_dir, mode=0o755, exist_ok=True)
        roots = {k: rootfs.ensure(k, log=self._log) for k in kinds}   # before any host starts
        with self._state_lock():
            state = self._load()
            self._ensure_client_key()
            pub = _read(self.key_path + ".pub").strip()
            by_name = {h["name"]: h for h in state["hosts"]}
            used_ports = {h["port"] for h in state["hosts"] if h.get("port")}
            starting, groups = [], {}
            try:
                for i in range(1, n + 1):
                    name = f"lab{i:02d}"
                    h = by_name.get(name)
                    if h is None:
                        h = {"name": name, "user": f"{self.prefix}{i:02d}", "port": None, "pid": None}
                        if per > 1:
                            h["sshd"] = f"sshd{(i - 1) // per + 1:03d}"
                        by_name[name] = h
                        state["hosts"].append(h)
                    if self._alive(h):
                        continue
                    self._prepare_host(h, pub, own_sshd=not h.get("sshd"))
                    if not h.get("port"):
                        h["port"] = _free_port(used_ports)
                        used_ports.add(h["port"])
                    if h.get("sshd"):
                        groups.setdefault(h["sshd"], []).append(h)
                        continue
                    self._start(sshd, h)
                    starting.append(h)
                for gname, members in groups.items():
                    self._start_shared(sshd, gname, members)
                for members in groups.values():
                    self._wait_shared(sshd, members, used_ports)
                for kind in kinds:
                    name = f"{rootfs.KINDS[kind]['host']}01"
                    h = by_name.get(name)
                    if h is None:
                        h = {"name": name, "kind": kind, "user": f"{self.prefix}{name}", "port": None,
                             "pid": None, "mounts": []}
                        by_name[name] = h
                        state["hosts"].append(h)
                    if rootfs.needs_emulation(kind):
                        machine = rootfs.KINDS[kind]["machine"]
                        rootfs.binfmt_acquire(machine, self.state_dir)
                        if machine not in state.setdefault("binfmt", []):
                            state["binfmt"].append(machine)
                    if self._alive(h):
                        continue
                    h["lower"] = roots[kind]["root"]
                    self._mount_root(h)
                    self._prepare_foreign(h, pub)
                    if not h.get("port"):
                        h["port"] = _free_port(used_ports)
                        used_ports.add(h["port"])
                    self._start(sshd, h)
                    starting.append(h)
                for h in starting:
                    self._wait_ready(sshd, h, used_ports)
            except BaseException:
                self._write_json(state)    # so `down` can still find what did start
                raise
            state["hosts"].sort(key=lambda h: (bool(h.get("kind")), h["name"]))
            state.update(prefix=self.prefix, key=self.key_path, known_hosts=self.known_hosts_path,
                         inventory=self.inventory_path, state_dir=self.state_dir)
            self._write_outputs(state)
            return state

    def down(self) -> list[int]:
        """Stop every recorded sshd (only if its /proc proves it is ours); returns PIDs.

        Mixed hosts also lose their session processes (descendants of the recorded sshd, still
        chrooted in that host's root), then the mounts recorded for them, then the lab's hold
        on binfmt_misc.
        """
        self._require_root()
        with self._state_lock():
            state = self._load()
            killed, listeners = [], []
            owner_of = {}
            for h in state["hosts"]:
                pid = h.get("pid")
                if pid and pid not in owner_of and self._alive(h):
                    victims = [pid]
                    if h.get("kind"):
                        victims += _descendants(pid, h["root"])
                    for v in victims:
                        try:
                            os.kill(v, signal.SIGTERM)
                            killed.append(v)
                            if v == pid:
                                listeners.append(v)
                            owner_of[v] = h
                        except ProcessLookupError:
                            pass
                h["pid"] = None
            deadline = time.monotonic() + 10
            pending = list(killed)
            while pending:
                for pid in list(pending):
                    proc = self._procs.get(pid)
                    if proc is not None:
                        proc.poll()          # reaps our own child through its Popen
                    else:
                        _reap(pid)
                    if _proc_cmdline(pid) is None:
                        pending.remove(pid)
                if pending and time.monotonic() > deadline:
                    for pid in pending:
                        h = owner_of[pid]
                        if h.get("kind"):
                            ours = _root_of(pid) == os.path.realpath(h["root"])
                        else:
                            cfgs = [x.get("config", "") for x in state["hosts"] if not x.get("kind")]
                            ours = any(is_lab_sshd(pid, c) for c in cfgs)
                        if ours:
                            os.kill(pid, signal.SIGKILL)
                    deadline = time.monotonic() + 10
                if pending:
                    time.sleep(0.05)
            for pid in killed:
                self._procs.pop(pid, None)
            if os.path.exists(self.key_path + ".pub"):
                pub = _read(self.key_path + ".pub").strip()
                for h in state["hosts"]:
                    if not h.get("kind"):
                        self._remove_authorized_key(h, pub)
            for h in state["hosts"]:
                if h.get("kind"):
                    self._unmount_root(h)
            for machine in state.pop("binfmt", []):
                rootfs.binfmt_release(machine, self.state_dir)
            if state["hosts"]:
                self._write_json(state)
            return listeners

    def status(self) -> list[dict]:
        """One row per recorded host: host, port, user, pid, alive (and kind in a mixed lab)."""
        hosts = self._load()["hosts"]
        mixed = any(h.get("kind") for h in hosts)
        rows = []
        for h in hosts:
            row = {"host": h["name"], "port": h.get("port"), "user": h["user"], "pid": h.get("pid"),
                   "alive": self._alive(h)}
            if mixed:
                row["kind"] = h.get("kind") or "native"
            rows.append(row)
        return rows

    def ssh_params(self, host) -> ConnParams:
        """ConnParams for a lab host (name like "lab01", or a host record)."""
        h = host if isinstance(host, dict) else next(
            (x for x in self.hosts if x["name"] == host), None)
        if h is None:
            raise LabError(f"no lab host named {host!r} in {self.json_path}")
        params = ConnParams(name=h["name"], address="127.0.0.1", port=int(h["port"]), user=h["user"],
                            key_file=self.key_path, known_hosts=self.known_hosts_path)
        if h.get("kind") and rootfs.needs_emulation(h["kind"]):
            params.connect_timeout = EMULATED_CONNECT_TIMEOUT
        return params

    def clean(self, patterns=(".hermes", ".fleetops*")) -> list[str]:
        """Remove test leftovers matching `patterns` in every lab home; never touches ~/.ssh."""
        removed = []
        for h in self.hosts:
            home = h.get("home")
            if not home or not os.path.isdir(home):
                continue
            for pat in patterns:
                for p in glob.glob(os.path.join(home, pat)):
                    if os.path.basename(p) == ".ssh" or os.path.dirname(p) != home:
                        continue
                    if os.path.isdir(p) and not os.path.islink(p):
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        try:
                            os.unlink(p)
                        except FileNotFoundError:
                            pass
                    removed.append(p)
        return removed

    # ---- internals ---------------------------------------------------------
    @staticmethod
    def _require_root() -> None:
        if os.geteuid() != 0:
            raise LabError("fleetops lab needs root (it creates Unix users and runs sshd servers); "
                           "run it with sudo, e.g. `sudo fleetops lab up 8`")

    def _ensure_sshd(self) -> str:
        path = _sshd_path()
        if path:
            return path
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        cmd = ["apt-get", "install", "-y", "--no-install-recommends", "openssh-server"]
        if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
            subprocess.run(["apt-get", "update"], env=env, capture_output=True)
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if r.returncode != 0:
                raise LabError("sshd is missing and `apt-get install openssh-server` failed: "
                               + (r.stderr.strip().splitlines() or ["?"])[-1])
        path = _sshd_path()
        if not path:
            raise LabError("openssh-server installed but no sshd binary found")
        return path

    @contextmanager
    def _state_lock(self):
        os.makedirs(self.state_dir, exist_ok=True)
        with open(os.path.join(self.state_dir, ".lock"), "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    @contextmanager
    def _global_lock(self):
        with open(GLOBAL_LOCK, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _load(self) -> dict:
        try:
            with open(self.json_path) as f:
                state = json.load(f)
        except FileNotFoundError:
            state = {}
        state.setdefault("hosts", [])
        return state

    def _write_json(self, state: dict) -> None:
        tmp = self.json_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=2)
        os.replace(tmp, self.json_path)

    def _ensure_client_key(self) -> None:
        if not os.path.exists(self.key_path):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C",
                            f"fleetops-lab:{self.state_dir}", "-f", self.key_path], check=True)
        os.chmod(self.key_path, 0o600)

    def _prepare_host(self, h: dict, pub: str, own_sshd: bool = True) -> None:
        """User (key-usable, own home), authorized key, and (own_sshd) host key and sshd_config paths."""
        user = h["user"]
        hdir = os.path.join(self.state_dir, "hosts", h["name"])
        os.makedirs(hdir, mode=0o700, exist_ok=True)
        with self._global_lock():
            try:
                pw = pwd.getpwnam(user)
            except KeyError:
                r = subprocess.run(["useradd", "-m", "-s", "/bin/bash", user], capture_output=True, text=True)
                if r.returncode not in (0, 9):      # 9: exists (created meanwhile)
                    raise LabError(f"useradd {user} failed: {r.stderr.strip()}") from None
                pw = pwd.getpwnam(user)
            if self._shadow_locked(user):
                subprocess.run(["usermod", "-p", "*", user], check=True, capture_output=True)
            if not os.path.isdir(pw.pw_dir):
                os.makedirs(pw.pw_dir, mode=0o755)
                os.chown(pw.pw_dir, pw.pw_uid, pw.pw_gid)
            sshdir = os.path.join(pw.pw_dir, ".ssh")
            os.makedirs(sshdir, exist_ok=True)
            os.chown(sshdir, pw.pw_uid, pw.pw_gid)
            os.chmod(sshdir, 0o700)
            ak = os.path.join(sshdir, "authorized_keys")
            lines = _read(ak).splitlines() if os.path.exists(ak) else []
            if pub not in lines:
                lines.append(pub)
                with open(ak, "w") as f:
                    f.write("\n".join(lines) + "\n")
            os.chown(ak, pw.pw_uid, pw.pw_gid)
            os.chmod(ak, 0o600)
        h["home"] = pw.pw_dir
        if not own_sshd:
            return
        h["host_key"] = os.path.join(hdir, "ssh_host_ed25519_key")
        h["config"] = os.path.join(hdir, "sshd_config")
        h["log"] = os.path.join(hdir, "sshd.log")
        if not os.path.exists(h["host_key"]):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h["name"],
                            "-f", h["host_key"]], check=True)

    def _alive(self, h: dict) -> bool:
        if h.get("kind"):
            return bool(h.get("root")) and is_lab_sshd(h.get("pid"), h.get("config", ""), root=h["root"])
        return is_lab_sshd(h.get("pid"), h.get("config", ""))

    @staticmethod
    def _log(msg: str) -> None:
        """Progress of slow steps (a first root build takes minutes) goes to stderr."""
        print(f"lab: {msg}", file=sys.stderr, flush=True)

    # ---- mixed hosts: a real sshd chrooted into an overlay of a cached foreign root ----------
    def _mount(self, h: dict, target: str, args: list[str]) -> None:
        """mount(8) and record the mount point at once, so `down` can undo a half-done `up`."""
        if target in _mountpoints():
            if target not in h["mounts"]:
                h["mounts"].append(target)
            return
        r = subprocess.run(["mount", *args, target], capture_output=True, text=True)
        if r.returncode != 0:
            raise LabError(f"lab host {h['name']}: mount {' '.join(args)} {target} failed: {r.stderr.strip()}")
        if target not in h["mounts"]:
            h["mounts"].append(target)

    def _mount_root(self, h: dict) -> None:
        """Overlay of the cached root (changes stay in this lab), plus /proc, a tiny /dev, devpts."""
        hdir = os.path.join(self.state_dir, "hosts", h["name"])
        root = os.path.join(hdir, "root")
        h["root"] = root
        h.setdefault("mounts", [])
        for d in ("upper", "work", "root"):
            os.makedirs(os.path.join(hdir, d), mode=0o755, exist_ok=True)
        if root not in _mountpoints() and not h.get("copied"):
            opts = f"lowerdir={h['lower']},upperdir={hdir}/upper,workdir={hdir}/work"
            try:
                self._mount(h, root, ["-t", "overlay", "overlay", "-o", opts])
            except LabError as exc:
                # no overlayfs here (e.g. the state dir is itself on an overlay): a private copy
                self._log(f"{exc}; copying the root instead (slower, ~200 MB)")
                subprocess.run(["cp", "-a", "--reflink=auto", h["lower"] + "/.", root], check=True)
                h["copied"] = True
        self._mount(h, f"{root}/proc", ["-t", "proc", "proc"])
        dev = f"{root}/dev"
        fresh_dev = dev not in _mountpoints()
        self._mount(h, dev, ["-t", "tmpfs", "-o", "mode=0755,size=1m,nosuid,noexec", "tmpfs"])
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
        self._mount(h, f"{dev}/pts", ["-t", "devpts", "-o", "newinstance,ptmxmode=0666,mode=0620,gid=5",
                                      "devpts"])

    def _unmount_root(self, h: dict) -> None:
        """Unmount exactly the recorded mounts, innermost first (lazily if something still holds one)."""
        mounts = h.get("mounts") or []
        for target in sorted(mounts, key=len, reverse=True):
            if target in _mountpoints():
                r = subprocess.run(["umount", target], capture_output=True)
                if r.returncode != 0:
                    subprocess.run(["umount", "-l", target], capture_output=True)
            if target not in _mountpoints():
                mounts.remove(target)
        h["mounts"] = mounts

    def _foreign_user(self, root: str, user: str) -> tuple[int, int]:
        """Add `user` to the root's own passwd/group/shadow (no useradd: it may be another arch)."""
        def lines(rel):
            try:
                return _read(os.path.join(root, rel)).splitlines()
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

    def _prepare_foreign(self, h: dict, pub: str) -> None:
        """User with the lab key authorised, host key and sshd_config, all inside the host's root."""
        root = h["root"]
        hdir = os.path.join(self.state_dir, "hosts", h["name"])
        uid, gid = self._foreign_user(root, h["user"])
        home = os.path.join(root, "home", h["user"])
        sshdir = os.path.join(home, ".ssh")
        os.makedirs(sshdir, exist_ok=True)
        os.chown(sshdir, uid, gid)
        os.chmod(sshdir, 0o700)
        ak = os.path.join(sshdir, "authorized_keys")
        lines = _read(ak).splitlines() if os.path.exists(ak) else []
        if pub not in lines:
            with open(ak, "w") as f:
                f.write("".join(x + "\n" for x in lines + [pub]))
        os.chown(ak, uid, gid)
        os.chmod(ak, 0o600)
        h.update(uid=uid, gid=gid, home=home, home_remote=f"/home/{h['user']}",
                 host_key=os.path.join(hdir, "ssh_host_ed25519_key"),
                 config="/etc/ssh/sshd_config.fleetops-lab",          # as sshd sees it, in the chroot
                 log=os.path.join(root, "var/log/fleetops-lab-sshd.log"))
        if not os.path.exists(h["host_key"]):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h["name"],
                            "-f", h["host_key"]], check=True)
        inside = os.path.join(root, "etc/ssh/fleetops_lab_host_ed25519_key")
        shutil.copyfile(h["host_key"], inside)
        os.chmod(inside, 0o600)
        shutil.copyfile(h["host_key"] + ".pub", inside + ".pub")

    def _start_foreign(self, h: dict) -> None:
        root = h["root"]
        cfg = os.path.join(root, h["config"].lstrip("/"))
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        with open(cfg, "w") as f:
            f.write(self._config_text(dict(h, host_key="/etc/ssh/fleetops_lab_host_ed25519_key"), False))
        os.chmod(cfg, 0o644)
        if "penalties" not in h:        # OpenSSH >= 9.8 in the root would throttle failing tests
            with open(cfg, "w") as f:
                f.write(self._config_text(dict(h, host_key="/etc/ssh/fleetops_lab_host_ed25519_key"), True))
            r = subprocess.run(["chroot", root, "/usr/sbin/sshd", "-t", "-f", h["config"]],
                               capture_output=True, text=True, env=env)
            h["penalties"] = r.returncode == 0
            with open(cfg, "w") as f:
                f.write(self._config_text(dict(h, host_key="/etc/ssh/fleetops_lab_host_ed25519_key"),
                                          h["penalties"]))
        inside_log = "/var/log/fleetops-lab-sshd.log"
        log = open(h["log"], "ab")
        try:
            p = subprocess.Popen(["chroot", root, "/usr/sbin/sshd", "-D", "-f", h["config"], "-E", inside_log],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd="/",
                                 start_new_session=True, close_fds=True)
        finally:
            log.close()
        self._procs[p.pid] = p
        h["pid"] = p.pid

    # ---- seeding files into hosts (tests of flows on mixed hosts) ------------------------------
    def host_home(self, host) -> tuple[str, int, int]:
        """(controller-side path of the host user's home, uid, gid) -- a chroot path for mixed hosts."""
        h = self._host(host)
        if h.get("kind"):
            return h["home"], int(h["uid"]), int(h["gid"])
        pw = pwd.getpwnam(h["user"])
        return pw.pw_dir, pw.pw_uid, pw.pw_gid

    def seed_file(self, host, rel_path: str, src: str | None = None, data: bytes | None = None,
                  mode: int = 0o600) -> str:
        """Put a file at ~/rel_path of the host user (parents made, owned by that user); returns
        its controller-side path. Works the same for native and mixed hosts."""
        home, uid, gid = self.host_home(host)
        dst = os.path.join(home, rel_path)
        parent = os.path.dirname(dst)
        missing = []
        while not os.path.isdir(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        for d in reversed(missing):
            os.mkdir(d, 0o700)
            os.chown(d, uid, gid)
        if os.path.lexists(dst):
            os.unlink(dst)
        if src is not None:
            shutil.copyfile(src, dst)
        else:
            with open(dst, "wb") as f:
                f.write(data or b"")
        os.chown(dst, uid, gid)
        os.chmod(dst, mode)
        return dst

    def seed_state_db(self, host, src: str, hermes_dir: str = ".hermes") -> str:
        """Copy a Hermes state.db (with its -wal/-shm if present) to ~/<hermes_dir>/state.db."""
        out = None
        for suffix in ("", "-wal", "-shm"):
            home, _, _ = self.host_home(host)
            dst = os.path.join(home, hermes_dir, "state.db" + suffix)
            if os.path.exists(src + suffix):
                p = self.seed_file(host, os.path.join(hermes_dir, "state.db" + suffix), src=src + suffix)
                out = out or p
            elif os.path.lexists(dst):
                os.unlink(dst)
        return out

    def _host(self, host) -> dict:
        h = host if isinstance(host, dict) else next((x for x in self.hosts if x["name"] == host), None)
        if h is None:
            raise LabError(f"no lab host named {host!r} in {self.json_path}")
        return h

    @staticmethod
    def _shadow_locked(user: str) -> bool:
        try:
            with open("/etc/shadow") as f:
                for line in f:
                    parts = line.split(":")
                    if parts[0] == user:
                        return parts[1].startswith("!") or parts[1] == ""
        except OSError:
            pass
        return True

    def _remove_authorized_key(self, h: dict, pub: str) -> None:
        home = h.get("home")
        if not home:
            return
        ak = os.path.join(home, ".ssh", "authorized_keys")
        with self._global_lock():
            try:
                lines = _read(ak).splitlines()
            except OSError:
                return
            if pub in lines:
                with open(ak, "w") as f:
                    f.write("".join(x + "\n" for x in lines if x != pub))

    def _config_text(self, h: dict, penalties: bool, shared: list | None = None) -> str:
        """sshd_config for host `h`, or (shared) for several hosts on one sshd, each port its own user's."""
        members = shared or [h]
        lines = [f"Port {m['port']}" for m in members] + [
            "ListenAddress 127.0.0.1",
            f"HostKey {h['host_key']}",
            "PidFile none",
            "UsePAM no",
            "PermitRootLogin no",
            "PubkeyAuthentication yes",
            "AuthorizedKeysFile .ssh/authorized_keys",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "AllowUsers " + " ".join(m["user"] for m in members),
            "MaxStartups 200",
            "MaxSessions 200",
            "LoginGraceTime 60",
            "StrictModes yes",
            "X11Forwarding no",
            "AllowTcpForwarding yes",
            "PrintMotd no",
            f"SetEnv {LAB_ENV}",
            "Subsystem sftp internal-sftp",
        ]
        if penalties:
            lines.append("PerSourcePenalties no")   # OpenSSH >= 9.8 would throttle failing tests
        if shared:                                  # Match blocks last: they run to the end of the file
            for m in shared:
                lines += [f"Match LocalPort {m['port']}", f"  AllowUsers {m['user']}"]
        return "\n".join(lines) + "\n"

    def _write_config(self, sshd: str, h: dict, shared: list | None = None) -> None:
        if Lab._penalties_supported is None:
            with open(h["config"], "w") as f:
                f.write(self._config_text(h, True, shared))
            r = subprocess.run([sshd, "-t", "-f", h["config"]], capture_output=True, text=True)
            Lab._penalties_supported = r.returncode == 0 or "PerSourcePenalties" not in r.stderr
        with open(h["config"], "w") as f:
            f.write(self._config_text(h, Lab._penalties_supported, shared))
        os.chmod(h["config"], 0o644)

    def _start_shared(self, sshd: str, gname: str, members: list) -> None:
        """One sshd for `members` (hosts of group `gname`): one port and one user each."""
        gdir = os.path.join(self.state_dir, "sshds", gname)
        os.makedirs(gdir, mode=0o700, exist_ok=True)
        key = os.path.join(gdir, "ssh_host_ed25519_key")
        if not os.path.exists(key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", gname, "-f", key], check=True)
        for m in members:
            m.update(host_key=key, config=os.path.join(gdir, "sshd_config"), log=os.path.join(gdir, "sshd.log"))
        self._start(sshd, members[0], shared=members)
        for m in members[1:]:
            m["pid"] = members[0]["pid"]

    def _wait_shared(self, sshd: str, members: list, used_ports: set, attempts: int = 5) -> None:
        """Banner on every member's port; if the shared sshd died (a port taken meanwhile), new ports."""
        for _ in range(attempts):
            deadline = time.monotonic() + BANNER_TIMEOUT
            waiting = list(members)
            p = self._procs.get(members[0]["pid"])
            while waiting and time.monotonic() < deadline and (p is None or p.poll() is None):
                waiting = [m for m in waiting if not self._banner(m["port"])]
                if waiting:
                    time.sleep(0.05)
            if not waiting:
                return
            if p is not None and p.poll() is None:
                raise LabError(f"lab sshd {members[0]['sshd']}: no SSH banner on 127.0.0.1:{waiting[0]['port']} "
                               f"within {BANNER_TIMEOUT:.0f}s (see {members[0]['log']})")
            self._procs.pop(members[0]["pid"], None)
            for m in members:
                m["port"] = _free_port(used_ports)
                used_ports.add(m["port"])
            self._start_shared(sshd, members[0]["sshd"], members)
        tail = _read(members[0]["log"]).strip().splitlines()[-1:] or ["?"]
        raise LabError(f"lab sshd {members[0]['sshd']}: keeps exiting: {tail[0]} (see {members[0]['log']})")

    def _start(self, sshd: str, h: dict, shared: list | None = None) -> None:
        if h.get("kind"):
            return self._start_foreign(h)
        self._write_config(sshd, h, shared)
        log = open(h["log"], "ab")
        try:
            p = subprocess.Popen([sshd, "-D", "-f", h["config"], "-E", h["log"]],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                 start_new_session=True, close_fds=True)
        finally:
            log.close()
        self._procs[p.pid] = p
        h["pid"] = p.pid

    def _wait_ready(self, sshd: str, h: dict, used_ports: set, attempts: int = 5) -> None:
        """Wait for the SSH banner; if sshd died (port taken meanwhile) retry on a new port."""
        # an emulated sshd on a busy 2-core machine can take many seconds to start
        limit = BANNER_TIMEOUT * (FOREIGN_SLOWDOWN if h.get("kind") else 1)
        for _attempt in range(attempts):
            deadline = time.monotonic() + limit
            while time.monotonic() < deadline:
                p = self._procs.get(h["pid"])
                if p is not None and p.poll() is not None:
                    break
                if self._banner(h["port"]):
                    return
                time.sleep(0.05)
            else:
                raise LabError(f"lab host {h['name']}: sshd on 127.0.0.1:{h['port']} sent no SSH "
                               f"banner within {limit:.0f}s (see {h['log']})")
            self._procs.pop(h["pid"], None)
            h["port"] = _free_port(used_ports)
            used_ports.add(h["port"])
            self._start(sshd, h)
        tail = _read(h["log"]).strip().splitlines()[-1:] or ["?"]
        raise LabError(f"lab host {h['name']}: sshd keeps exiting: {tail[0]} (see {h['log']})")

    @staticmethod
    def _banner(port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.settimeout(2)
                return s.recv(64).startswith(b"SSH-")
        except OSError:
            return False

    def _inventory_vars(self, h: dict) -> dict:
        out = {"ansible_host": "127.0.0.1", "ansible_port": h["port"], "ansible_user": h["user"],
               "ansible_ssh_private_key_file": self.key_path}
        if h.get("kind") and rootfs.needs_emulation(h["kind"]):
            out["fleetops_connect_timeout"] = EMULATED_CONNECT_TIMEOUT   # its sshd runs under qemu
        return out

    def _write_outputs(self, state: dict) -> None:
        import yaml

        lines = []
        for h in state["hosts"]:
            pub = _read(h["host_key"] + ".pub").split()
            lines.append(f"[127.0.0.1]:{h['port']} {pub[0]} {pub[1]}")
        tmp = self.known_hosts_path + ".tmp"
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.known_hosts_path)
        inv = {"all": {"children": {"lab": {
            "hosts": {h["name"]: self._inventory_vars(h) for h in state["hosts"]},
            "vars": {"fleetops_known_hosts": self.known_hosts_path},
        }}}}
        for kind in rootfs.KINDS:        # mixed hosts are also in a group named after their kind
            members = [h["name"] for h in state["hosts"] if h.get("kind") == kind]
            if members:
                inv["all"]["children"][rootfs.KINDS[kind]["group"]] = {"hosts": {m: None for m in members}}
        with open(self.inventory_path, "w") as f:
            f.write("# written by `fleetops lab up`; regenerated on every up\n")
            yaml.safe_dump(inv, f, sort_keys=False)
        self._write_json(state)
