"""Host facts for `gather_facts`: what a playbook needs to branch on, from the stdlib only.

Names follow Ansible's (ansible_architecture, ansible_distribution, ...) so
playbooks written for Ansible read the same; SQLite probes are fleetops' own
because Hermes' search tables need FTS5 and its trigram tokenizer.
"""
import os
import platform
import socket
import sys
import threading

OS_FAMILY = {
    "debian": "Debian", "ubuntu": "Debian", "linuxmint": "Debian", "raspbian": "Debian",
    "rhel": "RedHat", "centos": "RedHat", "fedora": "RedHat", "rocky": "RedHat",
    "almalinux": "RedHat", "ol": "RedHat", "amzn": "RedHat",
    "sles": "Suse", "opensuse": "Suse", "opensuse-leap": "Suse", "opensuse-tumbleweed": "Suse",
    "arch": "Archlinux", "manjaro": "Archlinux", "alpine": "Alpine", "gentoo": "Gentoo",
}
DISTRIBUTION = {
    "debian": "Debian", "ubuntu": "Ubuntu", "centos": "CentOS", "rhel": "RedHat",
    "fedora": "Fedora", "rocky": "Rocky", "almalinux": "AlmaLinux", "ol": "OracleLinux",
    "amzn": "Amazon", "alpine": "Alpine", "arch": "Archlinux", "sles": "SLES",
    "opensuse-leap": "openSUSE Leap", "opensuse-tumbleweed": "openSUSE Tumbleweed",
    "raspbian": "Debian", "linuxmint": "Linux Mint",
}


def read_os_release(path="/etc/os-release"):
    """KEY=value pairs of os-release (falls back to /usr/lib/os-release)."""
    out = {}
    for p in (path, "/usr/lib/os-release"):
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                for line in f:
                    line = line.strip()
                    if "=" in line and not line.startswith("#"):
                        k, v = line.split("=", 1)
                        out[k] = v.strip().strip("\"'")
            return out
        except OSError:
            continue
    return out


def _fqdn(timeout=2.0):
    """socket.getfqdn() can hang on a broken resolver; never let it hold up a run."""
    box = []
    th = threading.Thread(target=lambda: box.append(socket.getfqdn()), daemon=True)
    th.start()
    th.join(timeout)
    return box[0] if box else socket.gethostname()


def _sqlite_probe():
    try:
        import sqlite3
    except ImportError:
        return None, False, False
    fts5 = trigram = False
    con = sqlite3.connect(":memory:")
    try:
        try:
            con.execute("CREATE VIRTUAL TABLE t5 USING fts5(x)")
            fts5 = True
            con.execute("CREATE VIRTUAL TABLE t3 USING fts5(x, tokenize='trigram')")
            trigram = True
        except sqlite3.Error:
            pass
    finally:
        con.close()
    return sqlite3.sqlite_version, fts5, trigram


def _user():
    uid = os.getuid()
    try:
        import pwd
        pw = pwd.getpwuid(uid)
        return pw.pw_name, uid, pw.pw_dir
    except (ImportError, KeyError):
        return os.environ.get("USER", str(uid)), uid, os.path.expanduser("~")


def _nproc():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gather():
    rel = read_os_release()
    os_id = rel.get("ID", "").lower()
    like = rel.get("ID_LIKE", "").lower().split()
    family = OS_FAMILY.get(os_id) or next((OS_FAMILY[x] for x in like if x in OS_FAMILY), None)
    sqlite_version, fts5, trigram = _sqlite_probe()
    user, uid, home = _user()
    hostname = socket.gethostname()
    return {
        "ansible_architecture": platform.machine(),
        "ansible_machine": platform.machine(),
        "ansible_system": platform.system(),
        "ansible_kernel": platform.release(),
        "ansible_os_family": family or platform.system(),
        "ansible_distribution": DISTRIBUTION.get(os_id) or rel.get("NAME") or platform.system(),
        "ansible_distribution_version": rel.get("VERSION_ID", ""),
        "ansible_distribution_release": rel.get("VERSION_CODENAME") or rel.get("UBUNTU_CODENAME", ""),
        "ansible_python_version": platform.python_version(),
        "ansible_python": sys.executable,
        "ansible_sqlite_version": sqlite_version,
        "ansible_hostname": hostname.split(".")[0],
        "ansible_fqdn": _fqdn(),
        "ansible_user_id": user,
        "ansible_user_uid": uid,
        "ansible_user_dir": home,
        "ansible_nproc": _nproc(),
        "fleetops_sqlite_fts5": fts5,
        "fleetops_sqlite_trigram": trigram,
    }


def main(args):
    return {"changed": False, "failed": False, "msg": "", "ansible_facts": gather()}
