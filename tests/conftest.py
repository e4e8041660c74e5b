"""Shared fixtures: a session-wide lab of real sshd hosts (root only) and a per-test home cleaner.

FLEETOPS_LAB_HOSTS (default 8) sets the lab size; FLEETOPS_LAB_PREFIX (default
"fotest") the Unix user prefix, so two suites running at once on one machine can
use separate users. `mixed_lab` is a second, separate lab with chrooted hosts of
other kinds (arm01: aarch64 under qemu, old01: Debian bullseye); FLEETOPS_LAB_SKIP_MIXED=1
skips its tests, FLEETOPS_LAB_MIXED (default "aarch64,oldstable") picks the kinds.
`std_src` is the standard realistic Hermes store (built once by the real hermes-agent, cached).
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from fleetops.lab import Lab

# Fixtures shared across tests/unit, tests/lab and tests/scenario live in tests/support/.
pytest_plugins = ["tests.support.skip_policy", "tests.support.audit", "tests.support.backup",
                  "tests.support.playbook_run", "tests.support.cli_run", "tests.support.install",
                  "tests.support.postgres", "tests.support.redis_server", "tests.support.hermes_procs", "tests.support.lab_seed",
                  "tests.support.salvage"]


def end_leftovers(prefix: str, n: int) -> list:
    """SIGKILL what an earlier, interrupted run left running as the lab's users (a Hermes gateway
    started by a test, say): those users belong to the lab, and a process of theirs that outlived
    its run would be a holder, a writer or a heartbeat in this run's hosts. Returns the pids."""
    import pwd
    import signal

    uids = set()
    for i in range(1, n + 1):
        try:
            uids.add(pwd.getpwnam(f"{prefix}{i:02d}").pw_uid)
        except KeyError:
            continue
    ended = []
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        try:
            with open(f"/proc/{pid}/status") as fh:
                uid = next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
        except (OSError, StopIteration, ValueError):
            continue
        if uid in uids:
            try:
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
            except ProcessLookupError:
                pass
    return ended


def pytest_configure(config):
    config.addinivalue_line("markers", "lab: needs the local sshd lab (root)")


_ROOTS_BUILD: dict = {}


def _mixed_kinds() -> list:
    return [k for k in os.environ.get("FLEETOPS_LAB_MIXED", "aarch64,oldstable").split(",") if k]


def pytest_collection_finish(session):
    """When the mixed-lab tests are in this run and their roots are not built yet, build them now,
    in the background at low priority, side by side with the tests before them (the arm64 root
    takes minutes of qemu on a fresh machine; the `mixed_lab` fixture waits for it)."""
    from fleetops.lab import rootfs

    if (os.geteuid() != 0 or os.environ.get("FLEETOPS_LAB_SKIP_MIXED", "") not in ("", "0")
            or not any("lab/mixed/" in item.nodeid for item in session.items)):
        return
    kinds = [k for k in _mixed_kinds() if k in rootfs.KINDS and not rootfs.cached(k)]
    if not kinds:
        return
    import subprocess
    import sys
    code = "import sys; from fleetops.lab import rootfs; rootfs.ensure_all(sys.argv[1:])"
    log = open(os.path.join(tempfile.gettempdir(), "fleetops-test-roots.log"), "wb")
    _ROOTS_BUILD["proc"] = subprocess.Popen(["nice", "-n", "10", sys.executable, "-c", code, *kinds],
                                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)


def pytest_sessionfinish(session, exitstatus):
    """A roots build still running when the run ends is waited for, never cut off (debootstrap
    killed mid-way would leave mounts inside its half-built root); the next run reuses it."""
    proc = _ROOTS_BUILD.pop("proc", None)
    if proc is not None and proc.poll() is None:
        print(f"\nwaiting for the mixed-lab roots build (pid {proc.pid}) to finish; the next run reuses it",
              flush=True)
        proc.wait()


@pytest.fixture(scope="session")
def std_src(tmp_path_factory):
    """The standard corpus store (29 MB, 40 sessions, real hermes_state.SessionDB): one session copy."""
    from tests.corpus import build

    try:
        build.venv_python()
    except build.HermesVenvMissing as exc:
        pytest.skip(str(exc))
    p = tmp_path_factory.mktemp("std") / "state.db"
    build.standard_db(p)
    return p


@pytest.fixture(scope="session")
def lab():
    """A Lab with `.hosts`, `.inventory_path`, `.known_hosts_path`, `.key_path`; torn down by PID."""
    if os.geteuid() != 0:
        pytest.skip("the sshd lab needs root (it creates Unix users and runs sshd); run the tests with sudo")
    n = int(os.environ.get("FLEETOPS_LAB_HOSTS", "8"))
    prefix = os.environ.get("FLEETOPS_LAB_PREFIX", "fotest")
    state_dir = tempfile.mkdtemp(prefix="fleetops-lab-")
    the_lab = Lab(state_dir, prefix=prefix)
    end_leftovers(prefix, n)
    try:
        the_lab.up(n)
        yield the_lab
    finally:
        the_lab.down()
        shutil.rmtree(state_dir, ignore_errors=True)


def _mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(path.rstrip("/") + "/")]


@pytest.fixture(scope="session")
def mixed_lab():
    """A separate Lab: lab01 (native) + arm01 (aarch64, qemu) + old01 (bullseye), chrooted real sshds.

    Skips (with the reason) when FLEETOPS_LAB_SKIP_MIXED=1 or when no Debian mirror can be
    reached; any other failure to build a root (debootstrap, qemu, binfmt_misc) is an error.
    Hosts: `lab01`, `arm01`, `old01`; groups `lab`, `aarch64`, `oldstable`.
    Seed files with `mixed_lab.seed_file(host, "rel/path", src=...)` / `seed_state_db(host, src)`.
    """
    from fleetops.lab.rootfs import MirrorUnreachable

    if os.environ.get("FLEETOPS_LAB_SKIP_MIXED", "") not in ("", "0"):
        pytest.skip("mixed lab hosts skipped: FLEETOPS_LAB_SKIP_MIXED is set")
    if os.geteuid() != 0:
        pytest.skip("the mixed lab needs root (binfmt_misc, mounts, chroot, sshd)")
    kinds = os.environ.get("FLEETOPS_LAB_MIXED", "aarch64,oldstable")
    prefix = os.environ.get("FLEETOPS_LAB_PREFIX", "fotest")[:24] + "x"
    state_dir = tempfile.mkdtemp(prefix="fleetops-mixlab-")
    the_lab = Lab(state_dir, prefix=prefix)
    if "proc" in _ROOTS_BUILD:
        _ROOTS_BUILD["proc"].wait()       # its failure, if any, is up()'s to report: it builds again
    try:
        try:
            the_lab.up(1, mixed=kinds)
        except MirrorUnreachable as exc:
            pytest.skip(f"mixed lab unavailable: {exc}")
        yield the_lab
    finally:
        the_lab.down()
        if not _mounts_under(state_dir):        # never rmtree across a mount that is still there
            shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture
def lab_clean(lab):
    """Wipe ~/.hermes and ~/.fleetops* leftovers in every lab home (never ~/.ssh) before the test."""
    lab.clean((".hermes", ".fleetops*"))
    return lab
