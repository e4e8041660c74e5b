"""The mixed lab's hosts: chrooted real sshds, strict host keys, seeding, and a `down` that undoes
exactly what `up` did (processes, mounts, binfmt_misc hold)."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile

import pytest
import yaml

from fleetops.engine.connection.ssh import SSHTransport
from fleetops.lab import Lab, rootfs
from tests.support.paths import REPO

pytestmark = pytest.mark.lab


def _read(path):
    with open(path) as f:
        return f.read()


def _mounts():
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f]


def _sh(lab, host, cmd):
    t = SSHTransport(lab.ssh_params(host))
    t.connect()
    try:
        r = t.run(cmd)
        return r.rc, r.stdout.decode().strip()
    finally:
        t.close()


def test_hosts_are_chrooted_sshds_with_own_keys(mixed_lab):
    hosts = {h["name"]: h for h in mixed_lab.hosts}
    assert set(hosts) == {"lab01", "arm01", "old01"}
    assert all(r["alive"] for r in mixed_lab.status())
    kh = _read(mixed_lab.known_hosts_path).splitlines()
    inv = yaml.safe_load(_read(mixed_lab.inventory_path))["all"]["children"]
    assert set(inv["lab"]["hosts"]) == set(hosts)
    assert list(inv["aarch64"]["hosts"]) == ["arm01"] and list(inv["oldstable"]["hosts"]) == ["old01"]
    for name in ("arm01", "old01"):
        h = hosts[name]
        assert os.readlink(f"/proc/{h['pid']}/root") == os.path.realpath(h["root"])
        assert all(m in _mounts() for m in h["mounts"])
        typ, b64 = _read(h["host_key"] + ".pub").split()[:2]
        assert f"[127.0.0.1]:{h['port']} {typ} {b64}" in kh
        # the user exists only inside the root file system
        assert any(line.startswith(h["user"] + ":") for line in _read(os.path.join(h["root"], "etc/passwd")).splitlines())
        assert not any(line.startswith(h["user"] + ":") for line in _read("/etc/passwd").splitlines())
    # the aarch64 sshd really is an emulated process: the kernel runs it through qemu
    assert "qemu-aarch64" in os.readlink(f"/proc/{hosts['arm01']['pid']}/exe")
    rc, out = _sh(mixed_lab, "arm01", "uname -m; python3 -c 'import platform; print(platform.machine())'; id -un")
    assert rc == 0 and out.split() == ["aarch64", "aarch64", hosts["arm01"]["user"]]
    rc, out = _sh(mixed_lab, "old01", ". /etc/os-release; echo $VERSION_CODENAME; sqlite3 --version")
    assert rc == 0 and out.splitlines()[0] == "bullseye" and out.splitlines()[1].startswith("3.34.")


def test_seed_state_db_lands_in_the_chroot_home(mixed_lab, tmp_path):
    src = str(tmp_path / "state.db")
    con = sqlite3.connect(src)
    con.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY)")
    con.execute("INSERT INTO sessions VALUES ('s1')")
    con.commit()
    con.close()
    for name in ("arm01", "old01"):
        path = mixed_lab.seed_state_db(name, src)
        h = next(x for x in mixed_lab.hosts if x["name"] == name)
        assert path == os.path.join(h["root"], "home", h["user"], ".hermes", "state.db")
        rc, out = _sh(mixed_lab, name, "stat -c '%U %a' ~/.hermes ~/.hermes/state.db; "
                                       "sqlite3 ~/.hermes/state.db 'select id from sessions'")
        assert rc == 0 and out.splitlines() == [f"{h['user']} 700", f"{h['user']} 600", "s1"]
    mixed_lab.clean((".hermes",))
    assert not os.path.exists(os.path.join(mixed_lab.host_home("arm01")[0], ".hermes"))


def test_up_again_keeps_servers_and_down_undoes_only_its_own(mixed_lab):
    """A second lab with one aarch64 host: up twice, a live session during down, then nothing left."""
    state_dir = tempfile.mkdtemp(prefix="fleetops-mixlab-t-")
    prefix = os.environ.get("FLEETOPS_LAB_PREFIX", "fotest")[:24] + "y"
    small = Lab(state_dir, prefix=prefix)
    try:
        small.up(0, mixed="aarch64")
        (h,) = small.hosts
        small.up(0, mixed="aarch64")
        assert small.hosts[0]["pid"] == h["pid"]
        binfmt = json.loads(_read(rootfs.BINFMT_STATE))
        assert state_dir in binfmt["aarch64"]["owners"]
        assert os.path.abspath(mixed_lab.state_dir) in binfmt["aarch64"]["owners"]
        session = SSHTransport(small.ssh_params("arm01"))
        session.connect()                      # held open: down must end it to unmount
        try:
            stopped = small.down()
        finally:
            session.close()
        assert stopped == [h["pid"]]
        assert not any(m.startswith(state_dir + "/") for m in _mounts())
        assert all(not r["alive"] for r in small.status())
        binfmt = json.loads(_read(rootfs.BINFMT_STATE))
        assert state_dir not in binfmt["aarch64"]["owners"]
        # the other lab still holds binfmt_misc, so its emulated host keeps working
        assert _sh(mixed_lab, "arm01", "uname -m") == (0, "aarch64")
        # its changes lived in its own overlay, never in the shared cache
        assert not os.path.exists(os.path.join(rootfs.cache_paths("aarch64")["root"], "home", h["user"]))
    finally:
        small.down()
        if not any(m.startswith(state_dir + "/") for m in _mounts()):
            shutil.rmtree(state_dir, ignore_errors=True)


def test_unknown_kind_is_bad_input(tmp_path):
    import subprocess
    import sys
    repo = str(REPO)
    p = subprocess.run([sys.executable, "-m", "fleetops", "lab", "up", "1", "--with", "sparc",
                        "--dir", str(tmp_path / "l"), "--prefix", "fobad"], capture_output=True, text=True,
                       cwd=repo)
    assert p.returncode == 4 and "sparc" in p.stderr and "aarch64" in p.stderr
