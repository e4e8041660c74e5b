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


def _debian_version(rel):
    """ansible-core's Debian version: /etc/debian_version when it is numeric (12.11), else VERSION_ID."""
    try:
        with open("/etc/debian_version", encoding="utf-8", errors="replace") as f:
            text = f.read().strip()
    except OSError:
        return rel.get("VERSION_ID", "")
    return text if text[:1].isdigit() else rel.get("VERSION_ID", "")


# by OS family first, then whatever is installed (ansible-core's pkg_mgr fact)
PKG_MGRS = (("apt", "/usr/bin/apt-get"), ("dnf", "/usr/bin/dnf"), ("yum", "/usr/bin/yum"),
            ("zypper", "/usr/bin/zypper"), ("pacman", "/usr/bin/pacman"), ("apk", "/sbin/apk"),
            ("apk", "/usr/bin/apk"), ("portage", "/usr/bin/emerge"))
FAMILY_PKG_MGRS = {"Debian": ("apt",), "RedHat": ("dnf", "yum"), "Suse": ("zypper",),
                   "Archlinux": ("pacman",), "Alpine": ("apk",), "Gentoo": ("portage",)}


def pkg_mgr(family):
    found = [name for name, path in PKG_MGRS if os.path.exists(path)]
    for name in FAMILY_PKG_MGRS.get(family, ()):
        if name in found:
            return name
    return found[0] if found else "unknown"


def _route_default():
    """(interface, gateway) of the IPv4 default route from /proc/net/route, or (None, None)."""
    try:
        with open("/proc/net/route") as f:
            rows = [line.split() for line in f.readlines()[1:]]
    except OSError:
        return None, None
    best = None
    for r in rows:
        if len(r) >= 8 and r[1] == "00000000" and int(r[3], 16) & 2:   # destination 0/0 with RTF_GATEWAY
            if best is None or int(r[6]) < int(best[6]):
                best = r
    if best is None:
        return None, None
    return best[0], socket.inet_ntoa(int(best[2], 16).to_bytes(4, "little"))


def _ifaddr(iface, request):
    import fcntl
    import struct
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        raw = fcntl.ioctl(s.fileno(), request, struct.pack("256s", iface[:15].encode()))
    finally:
        s.close()
    return socket.inet_ntoa(raw[20:24])


def _sys_net(iface, name):
    try:
        with open("/sys/class/net/%s/%s" % (iface, name)) as f:
            return f.read().strip()
    except OSError:
        return None


def default_ipv4():
    """ansible_default_ipv4: the interface of the default route and its address ({} without one)."""
    iface, gateway = _route_default()
    if iface is None:
        return {}
    out = {"gateway": gateway, "interface": iface, "alias": iface}
    try:
        out["address"] = _ifaddr(iface, 0x8915)          # SIOCGIFADDR
        out["netmask"] = _ifaddr(iface, 0x891b)          # SIOCGIFNETMASK
        try:
            out["broadcast"] = _ifaddr(iface, 0x8919)    # SIOCGIFBRDADDR
        except OSError:
            out["broadcast"] = ""
    except (OSError, ImportError):
        return out
    mask = int.from_bytes(socket.inet_aton(out["netmask"]), "big")
    addr = int.from_bytes(socket.inet_aton(out["address"]), "big")
    out["network"] = socket.inet_ntoa((addr & mask).to_bytes(4, "big"))
    out["prefix"] = str(bin(mask).count("1"))
    mac, mtu, kind = _sys_net(iface, "address"), _sys_net(iface, "mtu"), _sys_net(iface, "type")
    if mac:
        out["macaddress"] = mac
    if mtu and mtu.isdigit():
        out["mtu"] = int(mtu)
    out["type"] = {"1": "ether", "772": "loopback", "776": "ipip"}.get(kind or "", "unknown")
    return out


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
    version = _debian_version(rel) if family == "Debian" and os_id == "debian" else rel.get("VERSION_ID", "")
    return {
        "ansible_architecture": platform.machine(),
        "ansible_machine": platform.machine(),
        "ansible_system": platform.system(),
        "ansible_kernel": platform.release(),
        "ansible_os_family": family or platform.system(),
        "ansible_distribution": DISTRIBUTION.get(os_id) or rel.get("NAME") or platform.system(),
        "ansible_distribution_version": version,
        "ansible_distribution_major_version": version.split(".")[0] if version else "NA",
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
        "ansible_pkg_mgr": pkg_mgr(family),
        "ansible_default_ipv4": default_ipv4(),
        "ansible_env": dict(os.environ),
        "fleetops_sqlite_fts5": fts5,
        "fleetops_sqlite_trigram": trigram,
    }


def main(args):
    return {"changed": False, "failed": False, "msg": "", "ansible_facts": gather()}
