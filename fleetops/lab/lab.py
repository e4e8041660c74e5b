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

This module is the Lab itself (state, up/down, starting and waiting for sshd); its parts are
users (Unix users and keys), procs (/proc), sshdconfig, chroot (mixed hosts' mounts), inventory.
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
import subprocess
import sys
import time
from contextlib import contextmanager

from fleetops.engine.connection.transport import ConnParams
from fleetops.lab import rootfs
from fleetops.lab.chroot import mount_root, unmount_root
from fleetops.lab.errors import LabError
from fleetops.lab.inventory import EMULATED_CONNECT_TIMEOUT, write_inventory, write_known_hosts
from fleetops.lab.procs import (banner, descendants, free_port, is_lab_sshd, proc_cmdline, read_text, reap,
                                root_of, sshd_path)
from fleetops.lab.sshdconfig import config_text, write_config
from fleetops.lab.users import authorize_in_root, ensure_native_user, foreign_user, remove_authorized_key

BANNER_TIMEOUT = 20.0
FOREIGN_SLOWDOWN = 9        # chrooted/emulated hosts may take this many times longer to answer
PORTS_PER_SSHD = 16         # sshd listens on at most 16 sockets (MAX_LISTEN_SOCKS)
OWN_SSHD_UP_TO = 64         # labs up to this size give every host its own sshd


class Lab:
    """N simulated hosts: `up(n)`, `down()`, `status()`; state in `state_dir/lab.json`."""

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
        roots = rootfs.ensure_all(kinds, log=self._log)   # before any host starts; side by side
        with self._state_lock():
            state = self._load()
            self._ensure_client_key()
            pub = read_text(self.key_path + ".pub").strip()
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
                        h["port"] = free_port(used_ports)
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
                    mount_root(h, os.path.join(self.state_dir, "hosts", h["name"]), self._log)
                    self._prepare_foreign(h, pub)
                    if not h.get("port"):
                        h["port"] = free_port(used_ports)
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
                        victims += descendants(pid, h["root"])
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
                        reap(pid)
                    if proc_cmdline(pid) is None:
                        pending.remove(pid)
                if pending and time.monotonic() > deadline:
                    for pid in pending:
                        h = owner_of[pid]
                        if h.get("kind"):
                            ours = root_of(pid) == os.path.realpath(h["root"])
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
                pub = read_text(self.key_path + ".pub").strip()
                for h in state["hosts"]:
                    if not h.get("kind"):
                        remove_authorized_key(h.get("home"), pub)
            for h in state["hosts"]:
                if h.get("kind"):
                    unmount_root(h)
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
        path = sshd_path()
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
        path = sshd_path()
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
        h["home"] = ensure_native_user(user, pub)
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
    def _prepare_foreign(self, h: dict, pub: str) -> None:
        """User with the lab key authorised, host key and sshd_config, all inside the host's root."""
        root = h["root"]
        hdir = os.path.join(self.state_dir, "hosts", h["name"])
        uid, gid = foreign_user(root, h["user"])
        home = os.path.join(root, "home", h["user"])
        authorize_in_root(home, uid, gid, pub)
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
            f.write(config_text(dict(h, host_key="/etc/ssh/fleetops_lab_host_ed25519_key"), False))
        os.chmod(cfg, 0o644)
        if "penalties" not in h:        # OpenSSH >= 9.8 in the root would throttle failing tests
            with open(cfg, "w") as f:
                f.write(config_text(dict(h, host_key="/etc/ssh/fleetops_lab_host_ed25519_key"), True))
            r = subprocess.run(["chroot", root, "/usr/sbin/sshd", "-t", "-f", h["config"]],
                               capture_output=True, text=True, env=env)
            h["penalties"] = r.returncode == 0
            with open(cfg, "w") as f:
                f.write(config_text(dict(h, host_key="/etc/ssh/fleetops_lab_host_ed25519_key"),
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
                waiting = [m for m in waiting if not banner(m["port"])]
                if waiting:
                    time.sleep(0.05)
            if not waiting:
                return
            if p is not None and p.poll() is None:
                raise LabError(f"lab sshd {members[0]['sshd']}: no SSH banner on 127.0.0.1:{waiting[0]['port']} "
                               f"within {BANNER_TIMEOUT:.0f}s (see {members[0]['log']})")
            self._procs.pop(members[0]["pid"], None)
            for m in members:
                m["port"] = free_port(used_ports)
                used_ports.add(m["port"])
            self._start_shared(sshd, members[0]["sshd"], members)
        tail = read_text(members[0]["log"]).strip().splitlines()[-1:] or ["?"]
        raise LabError(f"lab sshd {members[0]['sshd']}: keeps exiting: {tail[0]} (see {members[0]['log']})")

    def _start(self, sshd: str, h: dict, shared: list | None = None) -> None:
        if h.get("kind"):
            return self._start_foreign(h)
        write_config(sshd, h, shared)
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
                if banner(h["port"]):
                    return
                time.sleep(0.05)
            else:
                raise LabError(f"lab host {h['name']}: sshd on 127.0.0.1:{h['port']} sent no SSH "
                               f"banner within {limit:.0f}s (see {h['log']})")
            self._procs.pop(h["pid"], None)
            h["port"] = free_port(used_ports)
            used_ports.add(h["port"])
            self._start(sshd, h)
        tail = read_text(h["log"]).strip().splitlines()[-1:] or ["?"]
        raise LabError(f"lab host {h['name']}: sshd keeps exiting: {tail[0]} (see {h['log']})")

    def _write_outputs(self, state: dict) -> None:
        write_known_hosts(state["hosts"], self.known_hosts_path)
        write_inventory(state["hosts"], self.inventory_path, self.key_path, self.known_hosts_path)
        self._write_json(state)
