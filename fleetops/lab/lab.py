"""A local fleet of real OpenSSH servers, one Unix user, home and host key each.

Tests and demos need hosts that behave exactly like the field (real sshd, real
key auth, real known_hosts) without any VM: every simulated host is an
`sshd -D` on its own 127.0.0.1 port that only lets its own user in.
State lives in `state_dir/lab.json` so `down` kills exactly what `up` started.
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
import subprocess
import time
from contextlib import contextmanager

from fleetops.engine.transport import ConnParams
from fleetops.errors import FleetopsError

SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd")
GLOBAL_LOCK = "/run/fleetops-lab.lock"   # serialises useradd/authorized_keys edits across labs
BANNER_TIMEOUT = 20.0
LAB_ENV = ("HERMES_DISABLE_LAZY_INSTALLS=1 TIRITH_ENABLED=0 "
           "HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9")


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


def is_lab_sshd(pid: int | None, config: str) -> bool:
    """True only if PID is a live sshd started with `-f config` (guards against recycled PIDs).

    sshd rewrites its title to one string ("sshd: /usr/sbin/sshd -D -f CFG ... [listener] ..."),
    so both the argv form and the title form are accepted.
    """
    if not pid or not config:
        return False
    argv = _proc_cmdline(int(pid))
    if not argv:
        return False
    try:
        exe = os.path.basename(os.readlink(f"/proc/{int(pid)}/exe"))
    except OSError:
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
    def up(self, n: int) -> dict:
        """Start hosts 1..n (keeping those already running); returns the lab.json contents."""
        self._require_root()
        if n < 1:
            raise LabError("lab up needs at least 1 host")
        sshd = self._ensure_sshd()
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        os.makedirs(self.state_dir, mode=0o755, exist_ok=True)
        with self._state_lock():
            state = self._load()
            self._ensure_client_key()
            pub = _read(self.key_path + ".pub").strip()
            by_name = {h["name"]: h for h in state["hosts"]}
            used_ports = {h["port"] for h in state["hosts"] if h.get("port")}
            starting = []
            try:
                for i in range(1, n + 1):
                    name = f"lab{i:02d}"
                    h = by_name.get(name)
                    if h is None:
                        h = {"name": name, "user": f"{self.prefix}{i:02d}", "port": None, "pid": None}
                        by_name[name] = h
                        state["hosts"].append(h)
                    if is_lab_sshd(h.get("pid"), h.get("config", "")):
                        continue
                    self._prepare_host(h, pub)
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
            state["hosts"].sort(key=lambda h: h["name"])
            state.update(prefix=self.prefix, key=self.key_path, known_hosts=self.known_hosts_path,
                         inventory=self.inventory_path, state_dir=self.state_dir)
            self._write_outputs(state)
            return state

    def down(self) -> list[int]:
        """Stop every recorded sshd (only if its /proc cmdline proves it is ours); returns PIDs."""
        self._require_root()
        with self._state_lock():
            state = self._load()
            killed = []
            for h in state["hosts"]:
                pid = h.get("pid")
                if pid and is_lab_sshd(pid, h.get("config", "")):
                    try:
                        os.kill(pid, signal.SIGTERM)
                        killed.append(pid)
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
                        cfgs = [h.get("config", "") for h in state["hosts"]]
                        if any(is_lab_sshd(pid, c) for c in cfgs):
                            os.kill(pid, signal.SIGKILL)
                    deadline = time.monotonic() + 10
                if pending:
                    time.sleep(0.05)
            for pid in killed:
                self._procs.pop(pid, None)
            if os.path.exists(self.key_path + ".pub"):
                pub = _read(self.key_path + ".pub").strip()
                for h in state["hosts"]:
                    self._remove_authorized_key(h, pub)
            if state["hosts"]:
                self._write_json(state)
            return killed

    def status(self) -> list[dict]:
        """One row per recorded host: host, port, user, pid, alive."""
        return [{"host": h["name"], "port": h.get("port"), "user": h["user"], "pid": h.get("pid"),
                 "alive": is_lab_sshd(h.get("pid"), h.get("config", ""))}
                for h in self._load()["hosts"]]

    def ssh_params(self, host) -> ConnParams:
        """ConnParams for a lab host (name like "lab01", or a host record)."""
        h = host if isinstance(host, dict) else next(
            (x for x in self.hosts if x["name"] == host), None)
        if h is None:
            raise LabError(f"no lab host named {host!r} in {self.json_path}")
        return ConnParams(name=h["name"], address="127.0.0.1", port=int(h["port"]), user=h["user"],
                          key_file=self.key_path, known_hosts=self.known_hosts_path)

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

    def _prepare_host(self, h: dict, pub: str) -> None:
        """User (key-usable, own home), authorized key, host key and sshd_config for one host."""
        user = h["user"]
        hdir = os.path.join(self.state_dir, "hosts", h["name"])
        os.makedirs(hdir, mode=0o700, exist_ok=True)
        with self._global_lock():
            try:
                pw = pwd.getpwnam(user)
            except KeyError:
                r = subprocess.run(["useradd", "-m", "-s", "/bin/bash", user], capture_output=True, text=True)
                if r.returncode not in (0, 9):      # 9: exists (created meanwhile)
                    raise LabError(f"useradd {user} failed: {r.stderr.strip()}")
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
        h["host_key"] = os.path.join(hdir, "ssh_host_ed25519_key")
        h["config"] = os.path.join(hdir, "sshd_config")
        h["log"] = os.path.join(hdir, "sshd.log")
        if not os.path.exists(h["host_key"]):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", h["name"],
                            "-f", h["host_key"]], check=True)

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

    def _config_text(self, h: dict, penalties: bool) -> str:
        lines = [
            f"Port {h['port']}",
            "ListenAddress 127.0.0.1",
            f"HostKey {h['host_key']}",
            "PidFile none",
            "UsePAM no",
            "PermitRootLogin no",
            "PubkeyAuthentication yes",
            "AuthorizedKeysFile .ssh/authorized_keys",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            f"AllowUsers {h['user']}",
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
        return "\n".join(lines) + "\n"

    def _write_config(self, sshd: str, h: dict) -> None:
        if Lab._penalties_supported is None:
            with open(h["config"], "w") as f:
                f.write(self._config_text(h, True))
            r = subprocess.run([sshd, "-t", "-f", h["config"]], capture_output=True, text=True)
            Lab._penalties_supported = r.returncode == 0 or "PerSourcePenalties" not in r.stderr
        with open(h["config"], "w") as f:
            f.write(self._config_text(h, Lab._penalties_supported))
        os.chmod(h["config"], 0o644)

    def _start(self, sshd: str, h: dict) -> None:
        self._write_config(sshd, h)
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
        for attempt in range(attempts):
            deadline = time.monotonic() + BANNER_TIMEOUT
            while time.monotonic() < deadline:
                p = self._procs.get(h["pid"])
                if p is not None and p.poll() is not None:
                    break
                if self._banner(h["port"]):
                    return
                time.sleep(0.05)
            else:
                raise LabError(f"lab host {h['name']}: sshd on 127.0.0.1:{h['port']} sent no SSH "
                               f"banner within {BANNER_TIMEOUT:.0f}s (see {h['log']})")
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
            "hosts": {h["name"]: {"ansible_host": "127.0.0.1", "ansible_port": h["port"],
                                  "ansible_user": h["user"],
                                  "ansible_ssh_private_key_file": self.key_path}
                      for h in state["hosts"]},
            "vars": {"fleetops_known_hosts": self.known_hosts_path},
        }}}}
        with open(self.inventory_path, "w") as f:
            f.write("# written by `fleetops lab up`; regenerated on every up\n")
            yaml.safe_dump(inv, f, sort_keys=False)
        self._write_json(state)
