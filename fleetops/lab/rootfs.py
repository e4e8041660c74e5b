"""Foreign root file systems for the lab's mixed hosts, built once and cached.

Real fleets mix Oracle A1 (aarch64) machines and older distributions; payloads
must be proven there, not assumed. A mixed lab host is a real sshd chrooted into
a debootstrapped Debian root: arm64 under qemu user-mode emulation (binfmt_misc
with flags F and C: the interpreter works inside the chroot, setgid crontab too), or an older
release natively. Building a root takes minutes, so each is cached under
CACHE_DIR/<kind>/root with a stamp naming its recipe; hosts then run on an
overlay of it (their changes stay in the lab's state directory).
"""
from __future__ import annotations

import fcntl
import json
import os
import platform
import shutil
import subprocess
import time
import urllib.request
from contextlib import contextmanager

from fleetops.errors import BadInput, FleetopsError

CACHE_DIR = os.environ.get("FLEETOPS_LAB_ROOTFS_CACHE", "/var/cache/fleetops-lab/rootfs")
RECIPE_VERSION = 1
PACKAGES = ("python3", "openssh-server", "sqlite3", "cron", "procps")
MIRRORS = tuple(m for m in os.environ.get("FLEETOPS_LAB_MIRROR", "").split(",") if m) or (
    "http://deb.debian.org/debian", "http://archive.debian.org/debian")

# kind -> what to build; `host` is the inventory name stem, `group` the inventory group
KINDS = {
    "aarch64": {"suite": "bookworm", "arch": "arm64", "machine": "aarch64", "host": "arm", "group": "aarch64"},
    "oldstable": {"suite": "bullseye", "arch": "amd64", "machine": "x86_64", "host": "old", "group": "oldstable"},
}

BINFMT_DIR = "/proc/sys/fs/binfmt_misc"
BINFMT_STATE = "/run/fleetops-lab-binfmt.json"   # who uses our binfmt entries (several labs at once)
BINFMT_LOCK = "/run/fleetops-lab-binfmt.lock"
# ELF magic/mask per emulated machine (the same values as Debian's qemu-user-static binfmt.d files)
QEMU = {
    "aarch64": ("\\x7f\\x45\\x4c\\x46\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\xb7\\x00",
                "\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff"),
    "x86_64": ("\\x7f\\x45\\x4c\\x46\\x02\\x01\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x02\\x00\\x3e\\x00",
               "\\xff\\xff\\xff\\xff\\xff\\xfe\\xfe\\x00\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xfe\\xff\\xff\\xff"),
}
ELF_MACHINE = {"aarch64": 0xb7, "x86_64": 0x3e}


class RootfsError(FleetopsError):
    """A mixed-host root file system could not be built or used (no mirror, no qemu, no debootstrap)."""

    exit_code = 1


class MirrorUnreachable(RootfsError):
    """No Debian mirror answers: the one condition under which a root cannot be built here."""


def kinds_from_spec(spec) -> list[str]:
    """`"aarch64,oldstable"` (or a list) -> validated kind names, in order, no duplicates."""
    items = spec.split(",") if isinstance(spec, str) else list(spec or ())
    out = []
    for k in (x.strip() for x in items):
        if not k:
            continue
        if k not in KINDS:
            raise BadInput(f"unknown lab host kind {k!r} (known: {', '.join(KINDS)})", where="--with")
        if k not in out:
            out.append(k)
    return out


def native_machine() -> str:
    return platform.machine()


def needs_emulation(kind: str) -> bool:
    return KINDS[kind]["machine"] != native_machine()


@contextmanager
def _flock(path: str):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# ---- binfmt_misc ------------------------------------------------------------------------------

def _apt_install(pkg: str) -> str | None:
    """Install a Debian package the lab needs, like the lab does for openssh-server; None or why not."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", pkg]
    try:
        if subprocess.run(cmd, env=env, capture_output=True).returncode == 0:
            return None
        subprocess.run(["apt-get", "update", "-qq"], env=env, capture_output=True)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    except OSError as exc:
        return str(exc)
    return None if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1]


def _tool(pkg: str, paths: tuple, name: str) -> str:
    for attempt in range(2):
        for p in paths:
            if os.access(p, os.X_OK):
                return p
        found = shutil.which(name)
        if found:
            return found
        if attempt == 0:
            why = _apt_install(pkg)
            if why:
                raise RootfsError(f"{name} is missing and `apt-get install {pkg}` failed: {why}")
    raise RootfsError(f"{pkg} installed but no {name} found")


def _qemu_static(machine: str) -> str:
    return _tool("qemu-user-static", (f"/usr/bin/qemu-{machine}-static",), f"qemu-{machine}-static")


def _entry_flags(path: str) -> tuple[bool, str, str]:
    """(enabled, flags, magic-hex) of one binfmt_misc entry file."""
    enabled, flags, magic = False, "", ""
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line == "enabled":
                    enabled = True
                elif line.startswith("flags:"):
                    flags = line.split(":", 1)[1].strip()
                elif line.startswith("magic "):
                    magic = line.split(" ", 1)[1].strip()
    except OSError:
        pass
    return enabled, flags, magic


def _entries(machine: str, binfmt_dir: str) -> list[tuple[str, str]]:
    """(name, flags) of every enabled binfmt_misc entry that runs `machine`'s ELF binaries."""
    want = "0200%02x00" % ELF_MACHINE[machine]       # e_machine bytes at offset 18, little endian
    try:
        names = sorted(os.listdir(binfmt_dir))
    except OSError:
        return []
    out = []
    for name in names:
        if name in ("register", "status"):
            continue
        enabled, flags, magic = _entry_flags(os.path.join(binfmt_dir, name))
        if enabled and magic.startswith("7f454c4602") and magic[32:40] == want:
            out.append((name, flags))
    return out


def _usable_entry(machine: str, binfmt_dir: str = BINFMT_DIR) -> str | None:
    """The registered entry the lab can use for `machine` as it is: every enabled entry for it
    has F (the interpreter is opened at registration, so it works inside a chroot) and C (the
    emulated binary's setuid/setgid bits count: crontab is setgid). One without C, such as Debian's
    qemu-user-static default (flags OPF), makes crontab fail under emulation with "fopen:
    Permission denied", and which of two matching entries the kernel picks cannot be read from
    binfmt_misc, so then None: the lab registers its own, which, registered last, is the one used."""
    entries = _entries(machine, binfmt_dir)
    if entries and all("F" in flags and "C" in flags for _, flags in entries):
        return entries[0][0]
    return None


def _load_binfmt_state() -> dict:
    try:
        with open(BINFMT_STATE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _save_binfmt_state(state: dict) -> None:
    tmp = BINFMT_STATE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=2)
    os.replace(tmp, BINFMT_STATE)


def binfmt_acquire(machine: str, owner: str) -> dict:
    """Make `machine` binaries runnable (also inside chroots); `owner` is recorded for release.

    Uses the system's entries when each has flags F and C (_usable_entry); otherwise mounts
    binfmt_misc if needed and registers `fleetops-<machine>` beside them (a distribution's
    default is left as it is). Several labs share one entry (reference list).
    """
    if machine not in QEMU:
        raise RootfsError(f"no qemu user-mode recipe for {machine}")
    with _flock(BINFMT_LOCK):
        state = _load_binfmt_state()
        rec = state.setdefault(machine, {"owners": [], "registered": None})
        if not os.path.exists(os.path.join(BINFMT_DIR, "register")):
            r = subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", BINFMT_DIR],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise RootfsError(f"cannot mount binfmt_misc on {BINFMT_DIR}: {r.stderr.strip()}")
            state["mounted_by_fleetops"] = True
        name = rec.get("registered")
        if not (name and os.path.exists(os.path.join(BINFMT_DIR, name))):
            rec["registered"] = None
            if _usable_entry(machine, BINFMT_DIR) is None:
                rec["registered"] = _register(machine)
        if owner not in rec["owners"]:
            rec["owners"].append(owner)
        _save_binfmt_state(state)
        return dict(rec)


def _register(machine: str) -> str:
    """Register `fleetops-<machine>` (flags FC) beside whatever is there; one left by a lab that
    did not release it (same name, F and C) is taken over."""
    name = f"fleetops-{machine}"
    path = os.path.join(BINFMT_DIR, name)
    if os.path.exists(path):
        enabled, flags, _ = _entry_flags(path)
        if enabled and "F" in flags and "C" in flags:
            return name
        with open(path, "w") as f:
            f.write("-1")
    qemu = _qemu_static(machine)
    magic, mask = QEMU[machine]
    # F: open the interpreter now, so it works inside chroots; C: honour setuid/setgid
    # bits of the emulated binary (crontab is setgid) -- C implies O.
    line = f":{name}:M::{magic}:{mask}:{qemu}:FC"
    try:
        with open(os.path.join(BINFMT_DIR, "register"), "w") as f:
            f.write(line)
    except OSError as exc:
        others = ", ".join(f"{n} (flags {fl or 'none'})" for n, fl in _entries(machine, BINFMT_DIR))
        raise RootfsError(f"cannot register {name} with binfmt_misc: {exc}; the lab needs an entry for "
                          f"{machine} with flags F and C (setgid crontab fails without C)"
                          + (f"; registered: {others}: re-register it with flags FC, or remove it with "
                             f"`echo -1 > {BINFMT_DIR}/<name>`" if others else "")) from None
    return name


def binfmt_release(machine: str, owner: str) -> None:
    """Drop `owner`; the last owner unregisters our entry (and unmounts binfmt_misc if we mounted it)."""
    with _flock(BINFMT_LOCK):
        state = _load_binfmt_state()
        rec = state.get(machine)
        if not rec or owner not in rec.get("owners", []):
            return
        rec["owners"].remove(owner)
        if not rec["owners"]:
            name = rec.get("registered")
            if name and os.path.exists(os.path.join(BINFMT_DIR, name)):
                with open(os.path.join(BINFMT_DIR, name), "w") as f:
                    f.write("-1")
            state.pop(machine)
        others = [m for m in QEMU if state.get(m, {}).get("owners")]
        if not others and state.pop("mounted_by_fleetops", False):
            left = [n for n in os.listdir(BINFMT_DIR) if n not in ("register", "status")]
            if not left:
                subprocess.run(["umount", BINFMT_DIR], capture_output=True)
            else:
                state["mounted_by_fleetops"] = True      # someone else's entries live there now
        _save_binfmt_state(state)


# ---- building and caching ------------------------------------------------------------------------

def recipe(kind: str) -> dict:
    k = KINDS[kind]
    return {"version": RECIPE_VERSION, "kind": kind, "suite": k["suite"], "arch": k["arch"],
            "packages": list(PACKAGES)}


def cache_paths(kind: str) -> dict:
    base = os.path.join(CACHE_DIR, kind)
    return {"base": base, "root": os.path.join(base, "root"), "stamp": os.path.join(base, "stamp.json"),
            "log": os.path.join(base, "build.log"), "lock": os.path.join(CACHE_DIR, f".{kind}.lock")}


def cached(kind: str) -> dict | None:
    """The stamp of a complete cached root for `kind` whose recipe still matches, else None."""
    p = cache_paths(kind)
    try:
        with open(p["stamp"]) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return None
    if stamp.get("recipe") != recipe(kind) or not os.path.isfile(os.path.join(p["root"], "usr/bin/python3")):
        return None
    return stamp


def _reachable_mirror(suite: str) -> str:
    errors = []
    for m in MIRRORS:
        url = f"{m.rstrip('/')}/dists/{suite}/Release"
        try:
            with urllib.request.urlopen(url, timeout=15) as r:
                if r.status == 200:
                    return m
                errors.append(f"{url}: HTTP {r.status}")
        except Exception as exc:                     # noqa: BLE001 - any failure means "not this one"
            errors.append(f"{url}: {exc}")
    raise MirrorUnreachable(f"no Debian mirror serves {suite} ({'; '.join(errors)}); "
                            "set FLEETOPS_LAB_MIRROR to a reachable one")


def _du(path: str) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except OSError:
                pass
    return total


def ensure(kind: str, log=None) -> dict:
    """Return the cached root of `kind` (building it first if missing): {root, stamp, built}."""
    if kind not in KINDS:
        raise RootfsError(f"unknown lab host kind {kind!r}")
    p = cache_paths(kind)
    stamp = cached(kind)
    if stamp:
        return {"root": p["root"], "stamp": stamp, "built": False}
    os.makedirs(CACHE_DIR, exist_ok=True)
    with _flock(p["lock"]):                        # a concurrent first build: wait, then reuse
        stamp = cached(kind)
        if stamp:
            return {"root": p["root"], "stamp": stamp, "built": False}
        stamp = _build(kind, p, log)
        return {"root": p["root"], "stamp": stamp, "built": True}


def ensure_all(kinds, log=None) -> dict:
    """ensure() of each kind, the builds side by side (the emulated arm64 one takes minutes of
    qemu; a native one's build fits inside it): {kind: ensure()'s answer}."""
    kinds = list(kinds)
    if len(kinds) < 2:
        return {k: ensure(k, log=log) for k in kinds}
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=len(kinds)) as pool:
        futures = {k: pool.submit(ensure, k, log) for k in kinds}
        return {k: f.result() for k, f in futures.items()}


def _build(kind: str, p: dict, log) -> dict:
    k = KINDS[kind]
    debootstrap = _tool("debootstrap", ("/usr/sbin/debootstrap",), "debootstrap")
    mirror = _reachable_mirror(k["suite"])
    owner = f"build:{kind}:{os.getpid()}"
    emulate = needs_emulation(kind)
    if emulate:
        binfmt_acquire(k["machine"], owner)
    os.makedirs(p["base"], exist_ok=True)
    tmp = p["root"] + ".building"
    if os.path.isdir(tmp):
        shutil.rmtree(tmp)
    if os.path.isdir(p["root"]):
        if _in_use(p["root"]):
            raise RootfsError(f"{p['root']} is outdated but a running lab uses it; "
                              "`fleetops lab down` that lab first")
        shutil.rmtree(p["root"])
    if log:
        log(f"building the {kind} root ({k['suite']} {k['arch']}) from {mirror}; "
            f"log: {p['log']}")
    t0 = time.monotonic()
    try:
        cmd = [debootstrap, "--variant=minbase", f"--arch={k['arch']}",
               f"--include={','.join(PACKAGES)}", k["suite"], tmp, mirror]
        with open(p["log"], "wb") as lf:
            r = subprocess.run(cmd, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env=dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C"))
        if r.returncode != 0:
            with open(p["log"], errors="replace") as lf:
                tail = [x for x in lf.read().strip().splitlines() if x.strip()][-3:]
            raise RootfsError(f"debootstrap of {kind} failed (exit {r.returncode}): "
                              f"{' | '.join(tail) or '?'} (see {p['log']})")
        _finish_root(tmp)
        os.rename(tmp, p["root"])
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if emulate:
            binfmt_release(k["machine"], owner)
    stamp = {"recipe": recipe(kind), "mirror": mirror, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "build_seconds": round(time.monotonic() - t0, 1), "size_bytes": _du(p["root"]),
             "versions": _versions(p["root"])}
    with open(p["stamp"] + ".tmp", "w") as f:
        json.dump(stamp, f, indent=2)
    os.replace(p["stamp"] + ".tmp", p["stamp"])
    if log:
        log(f"built the {kind} root in {stamp['build_seconds']:.0f}s "
            f"({stamp['size_bytes'] / 1e6:.0f} MB)")
    return stamp


def _in_use(root: str) -> bool:
    """True if an overlay mount has `root` as its lower layer (a lab host runs on it)."""
    try:
        with open("/proc/self/mountinfo") as f:
            return any(f"lowerdir={root}," in line or f"lowerdir={root} " in line or
                       line.rstrip().endswith(f"lowerdir={root}") for line in f)
    except OSError:
        return False


def _finish_root(root: str) -> None:
    """Lab-wide tweaks baked into the cache: privsep dir, no shared host keys, no package caches."""
    os.makedirs(os.path.join(root, "run/sshd"), mode=0o755, exist_ok=True)
    os.chmod(os.path.join(root, "run/sshd"), 0o755)
    etc_ssh = os.path.join(root, "etc/ssh")
    for f in os.listdir(etc_ssh):
        if f.startswith("ssh_host_"):
            os.unlink(os.path.join(etc_ssh, f))
    for d in ("var/cache/apt/archives", "var/lib/apt/lists"):
        full = os.path.join(root, d)
        for f in os.listdir(full) if os.path.isdir(full) else ():
            fp = os.path.join(full, f)
            if os.path.isfile(fp) and (f.endswith(".deb") or d.endswith("lists")) and f != "lock":
                os.unlink(fp)
    with open(os.path.join(root, "etc/hosts"), "w") as f:
        f.write("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")


def _versions(root: str) -> dict:
    """Package versions of interest, from the root's dpkg status (no need to run its binaries)."""
    want = {"python3", "libsqlite3-0", "openssh-server"}
    out = {}
    name = None
    try:
        with open(os.path.join(root, "var/lib/dpkg/status"), errors="replace") as f:
            for line in f:
                if line.startswith("Package: "):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("Version: ") and name in want:
                    out[name] = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return out
