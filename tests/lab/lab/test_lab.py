"""The sshd lab: what `up` builds, that `down` kills exactly its own PIDs, idempotent `up`."""
import json
import os
import pwd
import signal
import socket
import stat
import subprocess
import tempfile
import shutil

import pytest
import yaml

from fleetops.engine.connection.ssh import SSHTransport
from fleetops.lab import Lab, LabError
from fleetops.lab.procs import is_lab_sshd

def _read(path):
    with open(path) as f:
        return f.read()


def _readb(path):
    with open(path, "rb") as f:
        return f.read()


pytestmark = pytest.mark.lab


def _banner(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            return s.recv(64)
    except OSError:
        return b""


def test_up_builds_hosts_users_keys_inventory(lab):
    hosts = lab.hosts
    assert len(hosts) == int(os.environ.get("FLEETOPS_LAB_HOSTS", "8"))
    rows = lab.status()
    assert [r["host"] for r in rows] == [h["name"] for h in hosts]
    assert all(r["alive"] for r in rows)
    assert len({h["port"] for h in hosts}) == len(hosts)
    kh = _read(lab.known_hosts_path).splitlines()
    inv = yaml.safe_load(_read(lab.inventory_path))["all"]["children"]["lab"]
    assert inv["vars"] == {"fleetops_known_hosts": lab.known_hosts_path}
    pub = _read(lab.key_path + ".pub").strip()
    assert stat.S_IMODE(os.stat(lab.key_path).st_mode) == 0o600
    for h in hosts:
        cmdline = _readb(f"/proc/{h['pid']}/cmdline")
        assert f"-f {h['config']}".encode() in cmdline.replace(b"\0", b" ")
        assert _banner(h["port"]).startswith(b"SSH-2.0-OpenSSH")
        typ, b64 = _read(h["host_key"] + ".pub").split()[:2]
        assert f"[127.0.0.1]:{h['port']} {typ} {b64}" in kh
        assert inv["hosts"][h["name"]] == {"ansible_host": "127.0.0.1", "ansible_port": h["port"],
                                           "ansible_user": h["user"],
                                           "ansible_ssh_private_key_file": lab.key_path}
        pw = pwd.getpwnam(h["user"])
        assert pw.pw_dir == h["home"] and pw.pw_shell == "/bin/bash"
        sshdir = os.path.join(h["home"], ".ssh")
        ak = os.path.join(sshdir, "authorized_keys")
        assert stat.S_IMODE(os.stat(sshdir).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(ak).st_mode) == 0o600
        assert os.stat(ak).st_uid == pw.pw_uid and os.stat(sshdir).st_uid == pw.pw_uid
        assert pub in _read(ak).splitlines()
        cfg = _read(h["config"])
        for line in ("PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
                     f"AllowUsers {h['user']}", "Subsystem sftp internal-sftp",
                     "SetEnv HERMES_DISABLE_LAZY_INSTALLS=1 TIRITH_ENABLED=0 "
                     "HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 HERMES_STATE_DB_GUARD_BYPASS=1"):
            assert line in cfg.splitlines()
    state = json.loads(_read(lab.json_path))
    assert [h["pid"] for h in state["hosts"]] == [h["pid"] for h in hosts]


def test_up_again_keeps_running_servers(lab):
    before = [(h["name"], h["pid"], h["port"]) for h in lab.hosts]
    lab.up(len(before))
    assert [(h["name"], h["pid"], h["port"]) for h in lab.hosts] == before


def test_ssh_params_and_clean(lab):
    h = lab.hosts[0]
    p = lab.ssh_params("lab01")
    assert (p.name, p.address, p.port, p.user, p.key_file, p.known_hosts) == (
        "lab01", "127.0.0.1", h["port"], h["user"], lab.key_path, lab.known_hosts_path)
    with pytest.raises(LabError):
        lab.ssh_params("lab99")
    t = SSHTransport(p)
    t.connect()
    t.run("mkdir -p ~/.fleetops-labtest-dir/x && touch ~/.fleetops-labtest-file ~/keep-labtest.txt")
    t.close()
    # own patterns only: the default (.hermes, .fleetops*) would disturb other suites sharing the users
    removed = lab.clean((".fleetops-labtest*", ".ss*"))
    left = set(os.listdir(h["home"]))
    assert ".fleetops-labtest-dir" not in left and ".fleetops-labtest-file" not in left
    assert {"keep-labtest.txt", ".ssh"} <= left
    assert os.path.join(h["home"], ".ssh") not in removed
    os.unlink(os.path.join(h["home"], "keep-labtest.txt"))


def test_own_lab_lifecycle_and_down_by_pid_only(lab):
    """A second, two-host lab: restart a dead host on `up`, `down` never kills a recycled PID."""
    state_dir = tempfile.mkdtemp(prefix="fleetops-lab2-")
    small = Lab(state_dir, prefix=(lab.prefix + "x")[:20])
    decoy = None
    try:
        small.up(2)
        h1, h2 = small.hosts
        # a host whose sshd died is restarted; the live one is kept
        os.kill(h1["pid"], signal.SIGTERM)
        small._procs[h1["pid"]].wait()
        assert [r["alive"] for r in small.status()] == [False, True]
        small.up(2)
        n1, n2 = small.hosts
        assert n2["pid"] == h2["pid"] and n1["pid"] != h1["pid"]
        assert all(r["alive"] for r in small.status())
        t = SSHTransport(small.ssh_params("lab01"))
        t.connect()
        assert t.run("whoami").stdout.decode().strip() == n1["user"]
        t.close()
        # a recorded PID that now belongs to something else must survive `down`
        decoy = subprocess.Popen(["sleep", "300"])
        state = json.loads(_read(small.json_path))
        state["hosts"].append({"name": "lab03", "user": n1["user"], "port": 1, "pid": decoy.pid,
                               "config": n1["config"], "home": n1["home"]})
        with open(small.json_path, "w") as f:
            json.dump(state, f)
        assert not is_lab_sshd(decoy.pid, n1["config"])
        killed = small.down()
        assert sorted(killed) == sorted([n1["pid"], n2["pid"]])
        assert decoy.poll() is None
        for pid in killed:
            assert not is_lab_sshd(pid, n1["config"]) and not is_lab_sshd(pid, n2["config"])
        assert all(not r["alive"] and r["pid"] is None for r in small.status())
        assert _banner(n1["port"]) == b"" and _banner(n2["port"]) == b""
        pub = _read(small.key_path + ".pub").strip()
        assert pub not in _read(os.path.join(n1["home"], ".ssh", "authorized_keys"))
        assert small.down() == []
    finally:
        if decoy is not None:
            decoy.kill()
            decoy.wait()
        small.down()
        shutil.rmtree(state_dir, ignore_errors=True)


def test_not_root_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(LabError) as ei:
        Lab(str(tmp_path)).up(1)
    assert "needs root" in str(ei.value) and "sudo" in str(ei.value)
    with pytest.raises(LabError):
        Lab(str(tmp_path)).down()
    assert not (tmp_path / "lab.json").exists()


def test_hosts_sharing_an_sshd_keep_their_own_port_and_user(lab):
    """A lab of 20 hosts, 8 per sshd (3 processes): each host answers as its own user on its own
    port, another host's user is refused there, and `down` stops each shared sshd once."""
    state_dir = tempfile.mkdtemp(prefix="fleetops-lab3-")
    shared = Lab(state_dir, prefix=(lab.prefix + "s")[:20])
    try:
        shared.up(20, per_sshd=8)
        hosts = shared.hosts
        pids = {h["pid"] for h in hosts}
        assert len(hosts) == 20 and len(pids) == 3 and len({h["port"] for h in hosts}) == 20
        assert all(is_lab_sshd(h["pid"], h["config"]) for h in hosts)
        for h in (hosts[0], hosts[7], hosts[8], hosts[19]):
            t = SSHTransport(shared.ssh_params(h["name"]))
            t.connect()
            assert t.run("whoami").stdout.decode().strip() == h["user"]
            t.close()
        # the same key is authorised for every user: only the Match block keeps lab02's user off lab01
        wrong = shared.ssh_params("lab01")
        wrong.user = hosts[1]["user"]
        t = SSHTransport(wrong)
        with pytest.raises(Exception) as exc:
            t.connect()
        t.close()
        assert "auth" in str(exc.value).lower(), exc.value
        assert f"User {hosts[1]['user']} from 127.0.0.1 not allowed because not listed in AllowUsers" \
            in _read(hosts[0]["log"])
        killed = shared.down()
        assert sorted(killed) == sorted(pids)
        assert all(not r["alive"] for r in shared.status())
        assert all(_banner(h["port"]) == b"" for h in hosts)
    finally:
        shared.down()
        shutil.rmtree(state_dir, ignore_errors=True)
