"""Helpers for the fault suite: the real CLI as a subprocess, inventories over the lab, TCP stand-ins.

Every test here drives `python -m fleetops` the way an operator does and checks what the
operator gets: the exit code, one clear line per faulty host, the other hosts carried on,
and what is (or is not) left on the hosts, which are real sshd servers (the `lab` fixture).
Timeouts are configured small per host (fleetops_connect_timeout); no test measures time.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def cli_env(env_extra=None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("FLEETOPS_DEBUG", None)
    env["COLUMNS"] = "200"
    env.update(env_extra or {})
    return env


def fleetops(*args, cwd, env_extra=None, timeout=600, test_payloads=False) -> subprocess.CompletedProcess:
    """`python -m fleetops ARGS` to completion (text output); with test_payloads, through
    tests/support/fault_injection.py so tests/payloads/ (selftest_crash) can be called too."""
    if test_payloads:
        from tests.support.fault_injection import TEST_PAYLOADS, __file__ as wrapper
        head = [sys.executable, wrapper, "--payloads", TEST_PAYLOADS, "--"]
    else:
        head = [sys.executable, "-m", "fleetops"]
    return subprocess.run([*head, *map(str, args)], cwd=cwd, env=cli_env(env_extra),
                          capture_output=True, text=True, timeout=timeout)


def start_fleetops(*args, cwd, env_extra=None) -> subprocess.Popen:
    """`python -m fleetops ARGS` in the background (binary pipes: read with .communicate())."""
    return subprocess.Popen([sys.executable, "-m", "fleetops", *map(str, args)], cwd=cwd, env=cli_env(env_extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def one_error_line(proc) -> str:
    """The CLI's bad-input contract: exactly one line on stderr, `fleetops: error: ...`, no traceback."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("fleetops: error: "), lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


def write_inventory(path, lab, hosts, overrides=None, group_vars=None, known_hosts=None) -> str:
    """A YAML inventory of lab hosts (by index) named lab01.., each with its overrides."""
    overrides = overrides or {}
    entries = {}
    for i in hosts:
        h = lab.hosts[i]
        entry = {"ansible_host": "127.0.0.1", "ansible_port": int(h["port"]), "ansible_user": h["user"],
                 "ansible_ssh_private_key_file": lab.key_path}
        entry.update(overrides.get(i, {}))
        entries[h["name"]] = entry
    gv = {"fleetops_known_hosts": str(known_hosts or lab.known_hosts_path)}
    gv.update(group_vars or {})
    inv = {"all": {"children": {"fleet": {"hosts": entries, "vars": gv}}}}
    Path(path).write_text(yaml.safe_dump(inv, sort_keys=False))
    return str(path)


def write(path, text: str) -> str:
    Path(path).write_text(text)
    return str(path)


def report_json(results_dir, run_id="latest", cwd=None) -> dict:
    proc = fleetops("report", run_id, "--json", "--results", results_dir, cwd=cwd or results_dir)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def by_task(doc) -> dict:
    """{task name: {host: (status, result)}} over all plays of a run document (--json or report)."""
    out: dict = {}
    for play in doc["plays"]:
        for task in play["tasks"]:
            slot = out.setdefault(task["name"], {})
            for host, entry in task["results"].items():
                slot[host] = (entry["status"], entry["result"])
    return out


def home(lab, i) -> Path:
    return Path(lab.hosts[i]["home"])


def chown_to(lab, i, path) -> None:
    shutil.chown(str(path), user=lab.hosts[i]["user"], group=lab.hosts[i]["user"])


def wait_for(predicate, what: str, limit: float = 120.0, proc=None):
    """Poll until predicate() is true (a generous safety limit, not a timing assertion)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"fleetops ended (rc {proc.returncode}) before {what}: {err.decode()[-2000:]}")
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


# ---- processes of one lab host -----------------------------------------------------------------

def _children_map() -> dict:
    kids: dict = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    return kids


def process_tree(pid: int) -> list:
    kids = _children_map()
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def kill_host_sshd(lab, i) -> list:
    """SIGKILL a lab host's sshd and every session process under it (as if the host died)."""
    pids = process_tree(int(lab.hosts[i]["pid"]))
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return pids


def restart_lab(lab) -> None:
    """Bring every lab sshd back (same ports, same host keys): the session lab is shared."""
    lab.up(len(lab.hosts))


# ---- TCP stand-ins -------------------------------------------------------------------------------

class Listener:
    """A TCP server on 127.0.0.1 that counts connections and, per mode:
    "record" closes at once; "silent" accepts and never says a word; "forward" relays to
    `target` (a lab sshd) after `delay` seconds."""

    def __init__(self, mode="record", target=None, delay=0.0):
        self.mode, self.target, self.delay = mode, target, delay
        self.connections = 0
        self._stop = threading.Event()
        self._socks: list = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            self._socks.append(conn)
            if self.mode == "record":
                conn.close()
            elif self.mode == "forward":
                threading.Thread(target=self._forward, args=(conn,), daemon=True).start()

    def _forward(self, conn):
        if self._stop.wait(self.delay):
            return
        try:
            up = socket.create_connection(("127.0.0.1", self.target))
        except OSError:
            conn.close()
            return
        self._socks.append(up)

        def pipe(a, b):
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    b.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    b.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
        threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
        pipe(up, conn)

    def close(self):
        self._stop.set()
        for s in [self.sock] + self._socks:
            try:
                s.close()
            except OSError:
                pass


@pytest.fixture
def listener():
    made = []

    def make(mode="record", target=None, delay=0.0):
        made.append(Listener(mode, target, delay))
        return made[-1]
    yield make
    for x in made:
        x.close()


@pytest.fixture
def work(tmp_path):
    """A working folder for playbooks/inventories; results go to work/runs."""
    return tmp_path


@pytest.fixture
def fleet(lab):
    """The session lab with this suite's leftovers (~/fault-*, ~/.fleetops) removed from every home."""
    lab.clean(("fault-*", ".fleetops*", "pwned*"))
    yield lab
    lab.clean(("fault-*", "pwned*"))
