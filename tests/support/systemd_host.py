"""A lab host whose PID 1 is a real systemd: systemd-nspawn boots this machine's own systemd in a
container whose /usr is this machine's (under an overlay that takes the test units) and whose /etc is a copy with nothing
enabled but the container's sshd, a login user with passwordless sudo, and test units.

The container shares this machine's network, so its sshd listens on a loopback port that both
ansible-core and fleetops reach as any SSH host; `systemctl` inside talks to that container's
systemd, so a system unit started, enabled or masked there is a real one. Booting takes a few
seconds; the container is powered off (SIGTERM to nspawn, then SIGKILL) when the host is
stopped. Needs root and systemd-nspawn (Debian's systemd-container).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import time
from dataclasses import dataclass, field

USER = "fosys"
UID = 4242
NSPAWN = shutil.which("systemd-nspawn") or "/usr/bin/systemd-nspawn"


def available() -> str | None:
    """None when a systemd host can be started here, else why not."""
    if os.geteuid() != 0:
        return "a systemd container needs root"
    if not os.path.exists(NSPAWN):
        return "systemd-nspawn missing: scripts/setup.sh installs Debian's systemd-container"
    if not os.path.exists("/usr/lib/systemd/systemd"):
        return "no systemd in /usr to boot"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SystemdHost:
    directory: str
    name: str = "fosys1"
    port: int = 0
    proc: subprocess.Popen | None = None
    units: dict = field(default_factory=dict)

    @property
    def root(self) -> str:
        return os.path.join(self.directory, "root")

    @property
    def key_path(self) -> str:
        return os.path.join(self.directory, "id_ed25519")

    @property
    def known_hosts_path(self) -> str:
        return os.path.join(self.directory, "known_hosts")

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, "nspawn.log")

    @property
    def usr_upper(self) -> str:
        """What the container writes to its /usr (an overlay on this machine's) lands here."""
        return os.path.join(self.directory, "usr-upper")

    def path(self, inside: str) -> str:
        """This machine's path of a file inside the container."""
        return os.path.join(self.root, inside.lstrip("/"))

    def write_user_file(self, rel: str, text: str) -> str:
        """A file of the login user's home (and its directories), owned by the user."""
        home = self.path(f"/home/{USER}")
        path = os.path.join(home, rel)
        d = os.path.dirname(path)
        os.makedirs(d, exist_ok=True)
        while d != home:
            os.chown(d, UID, UID)
            d = os.path.dirname(d)
        with open(path, "w") as fh:
            fh.write(text)
        os.chown(path, UID, UID)
        return path

    def inventory(self, path: str, group: str = "sysd") -> str:
        import yaml
        with open(path, "w") as fh:
            yaml.safe_dump({"all": {"vars": {"fleetops_known_hosts": self.known_hosts_path}, "children": {group: {
                "hosts": {self.name: {"ansible_host": "127.0.0.1", "ansible_port": self.port, "ansible_user": USER,
                                      "ansible_ssh_private_key_file": self.key_path,
                                      "ansible_python_interpreter": "/usr/bin/python3",
                                      "ansible_pipelining": True}}}}}}, fh)
        return path

    def inside(self, *argv: str) -> subprocess.CompletedProcess:
        """A command inside the container, as its root: the test's own view of the truth."""
        pid = self._init_pid()
        assert pid is not None, "the systemd host is not running"
        return subprocess.run(["nsenter", "-t", str(pid), "-a", "--", *argv], capture_output=True, text=True,
                              timeout=300)

    def systemctl(self, *argv: str) -> subprocess.CompletedProcess:
        return self.inside("/usr/bin/systemctl", *argv)

    def _init_pid(self) -> int | None:
        """The container's PID 1, as this machine numbers it (nspawn's child)."""
        if self.proc is None:
            return None
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as fh:
                kids = fh.read().split()
        except OSError:
            return None
        return int(kids[0]) if kids else None

    def build(self, units: dict) -> None:
        """The root: links into /usr, a copy of /etc with nothing enabled, the user, sshd, `units`."""
        self.units = dict(units)
        root = self.root
        for d in ("var/tmp", "var/lib", "var/log", "tmp", "home", "root", "dev", "proc", "sys", "run", "usr"):
            os.makedirs(os.path.join(root, d), exist_ok=True)
        for d in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink("/" + d) and not os.path.lexists(os.path.join(root, d)):
                os.symlink(os.readlink("/" + d), os.path.join(root, d))
        self._var_skeleton()
        etc = os.path.join(root, "etc")
        subprocess.run(["cp", "-a", "/etc", etc], check=True)
        for sub in os.listdir(os.path.join(etc, "systemd", "system")):
            p = os.path.join(etc, "systemd", "system", sub)
            if sub.endswith(".wants") and os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
        for d in os.listdir(etc):          # no SysV service of this machine starts in the container
            if d.startswith("rc") and d.endswith(".d") and os.path.isdir(os.path.join(etc, d)):
                for name in os.listdir(os.path.join(etc, d)):
                    if name[:1] in ("S", "K"):
                        os.unlink(os.path.join(etc, d, name))
        for name in ("os-release", "machine-id"):
            p = os.path.join(etc, name)
            if os.path.lexists(p):
                os.unlink(p)
        shutil.copy("/usr/lib/os-release", os.path.join(etc, "os-release"))
        open(os.path.join(etc, "machine-id"), "w").close()     # systemd makes a transient one
        with open(os.path.join(etc, "passwd"), "a") as fh:
            fh.write(f"{USER}:x:{UID}:{UID}::/home/{USER}:/bin/bash\n")
        with open(os.path.join(etc, "group"), "a") as fh:
            fh.write(f"{USER}:x:{UID}:\n")
        with open(os.path.join(etc, "shadow"), "a") as fh:
            fh.write(f"{USER}:*:19000:0:99999:7:::\n")
        with open(os.path.join(etc, "sudoers.d", USER), "w") as fh:
            fh.write(f"{USER} ALL=(ALL) NOPASSWD: ALL\n")
        os.chmod(os.path.join(etc, "sudoers.d", USER), 0o440)
        home = os.path.join(root, "home", USER)
        os.makedirs(os.path.join(home, ".ssh"), mode=0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.key_path], check=True)
        shutil.copy(self.key_path + ".pub", os.path.join(home, ".ssh", "authorized_keys"))
        for dirpath, _dirs, files in os.walk(home):
            os.chown(dirpath, UID, UID)
            for f in files:
                os.chown(os.path.join(dirpath, f), UID, UID)
        self._sshd(etc)
        # where a package puts its units (masking needs /etc free of them)
        vendor = os.path.join(self.usr_upper, "lib", "systemd", "system")
        os.makedirs(vendor, exist_ok=True)
        for name, text in units.items():
            with open(os.path.join(vendor, name), "w") as fh:
                fh.write(text)

    def add_rpm_repo(self, repo: str, name: str = "fotest") -> None:
        """A dnf repository (a directory from tests/support/rpm_repo.py) at /srv/NAME, enabled."""
        shutil.copytree(repo, self.path(f"/srv/{name}"))
        os.makedirs(self.path("/etc/yum.repos.d"), exist_ok=True)
        with open(self.path(f"/etc/yum.repos.d/{name}.repo"), "w") as fh:
            fh.write(f"[{name}]\nname=the fleetops tests' packages\nbaseurl=file:///srv/{name}\ngpgcheck=0\nenabled=1\n")

    def _var_skeleton(self) -> None:
        """/var as this machine's packages laid it out (cron's spool, dpkg's and apt's directories,
        /var/run's link), its directories and links only: nothing any other user left in them."""
        for dirpath, dirs, files in os.walk("/var"):
            rel = os.path.relpath(dirpath, "/")
            if rel in ("var/tmp", "var/cache/fleetops-lab") or rel.startswith("var/tmp/"):
                dirs[:] = []
                continue
            for name in dirs + files:
                src = os.path.join(dirpath, name)
                dst = os.path.join(self.root, rel, name)
                if os.path.islink(src):
                    if not os.path.lexists(dst):
                        os.symlink(os.readlink(src), dst)
                    dirs[:] = [d for d in dirs if d != name]
                elif os.path.isdir(src):
                    st = os.stat(src)
                    os.makedirs(dst, exist_ok=True)
                    os.chown(dst, st.st_uid, st.st_gid)
                    os.chmod(dst, stat.S_IMODE(st.st_mode))

    def _sshd(self, etc: str) -> None:
        conf = os.path.join(etc, "fo-sshd")
        os.makedirs(conf, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(conf, "host_key")], check=True)
        self.port = _free_port()
        with open(os.path.join(conf, "sshd_config"), "w") as fh:
            fh.write(f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey /etc/fo-sshd/host_key\n"
                     f"AllowUsers {USER}\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
                     "UsePAM yes\nPidFile none\nSubsystem sftp internal-sftp\n")
        with open(os.path.join(etc, "systemd", "system", "fo-sshd.service"), "w") as fh:
            fh.write("[Unit]\nDescription=the lab's sshd\n[Service]\nRuntimeDirectory=sshd\n"
                     "ExecStart=/usr/sbin/sshd -D -e -f /etc/fo-sshd/sshd_config\n"
                     "[Install]\nWantedBy=multi-user.target\n")
        wants = os.path.join(etc, "systemd", "system", "multi-user.target.wants")
        os.makedirs(wants, exist_ok=True)
        os.symlink("/etc/systemd/system/fo-sshd.service", os.path.join(wants, "fo-sshd.service"))
        with open(os.path.join(conf, "host_key.pub")) as fh:
            kind, key = fh.read().split()[:2]
        with open(self.known_hosts_path, "w") as fh:
            fh.write(f"[127.0.0.1]:{self.port} {kind} {key}\n")

    def start(self, timeout: float = 60.0) -> None:
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [NSPAWN, "-q", "-D", self.root, f"--overlay=/usr:{self.usr_upper}:/usr", "--register=no", "--keep-unit", "-M", self.name,
             "--link-journal=no", "--console=pipe", "-b"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"systemd-nspawn exited {self.proc.returncode}: {self._log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the container's sshd did not answer within {timeout:g}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                return fh.read()[-1500:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, grace: float = 5.0) -> None:
        """Power the container off: SIGTERM to nspawn (the container's systemd shuts down); what is
        still up after `grace` seconds is ended by SIGKILL to its PID 1, which ends every process
        of the container's PID namespace."""
        if self.proc is None:
            return
        proc = self.proc
        init = self._init_pid()
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                if init is not None:
                    try:
                        os.kill(init, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
        self.proc = None
