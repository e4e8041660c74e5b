#!/usr/bin/env python3
"""Where a connection's round trips go: fleetops' SSH transport and OpenSSH's ssh, step by step.

One lab host behind the delay proxy (fleetops/lab/delay.py, as bench/wan.py uses it). fleetops
connects and runs `--commands` commands on one connection (through its HostSession with
`--session`: the run lock taken with the first command, as a run does); OpenSSH's `ssh`
(ControlMaster off, so each command is a connection of its own) connects and runs the first.
Each step is counted two ways: the proxy's causal depth (round trips, by order, not by speed)
and the step's wall time / RTT, rounded. Steps:

- tcp: not delayed by the proxy (the kernel accepts on loopback), so 0 here; a real link pays
  1 round trip before the first byte;
- version+kex: until the server's NEWKEYS is read (paramiko's log, `ssh -v`'s lines);
- auth: until the server accepts the key;
- command i: one command, its output and exit status read (with `--stdin`, a line on its stdin
  as payloads have).

Never asserts a time.

    python3 bench/wan_steps.py [--rtt-ms 50] [--commands 3] [--stdin] [--session]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import ROOT, lab as make_lab  # noqa: E402
from wan import write_inventories  # noqa: E402

sys.path.insert(0, ROOT)
from fleetops.engine.connection.session import HostSession  # noqa: E402
from fleetops.engine.connection.ssh import SSHTransport  # noqa: E402
from fleetops.engine.connection.transport import ConnParams  # noqa: E402
from fleetops.lab.delay import DelayProxy  # noqa: E402

# paramiko's log lines that end a step, and `ssh -v`'s
PARAMIKO_MARKS = (("Switch to new keys", "version+kex"), ("successful!", "auth"))
SSH_MARKS = (("Connection established", "tcp"), ("SSH2_MSG_NEWKEYS received", "version+kex"),
             ("Authenticated to", "auth"), ("rtype exit-status", "command 1"))


class Steps:
    """Marks (step, seconds since start, proxy trips) as a connection goes; rows per step."""

    def __init__(self, proxy: DelayProxy, host: str):
        self.proxy, self.host = proxy, host
        self.t0 = time.monotonic()
        self.marks: list = []
        self._lock = threading.Lock()

    def mark(self, step: str) -> None:
        with self._lock:
            if all(s != step for s, _, _ in self.marks):
                self.marks.append((step, time.monotonic() - self.t0, self.proxy.trips(self.host)))

    def rows(self, rtt: float) -> list:
        """(step, trips, wall/RTT rounded) per step, each from the end of the one before."""
        out, t_prev, d_prev = [], 0.0, 0
        for step, t, d in self.marks:
            out.append((step, d - d_prev, round((t - t_prev) / rtt)))
            t_prev, d_prev = t, d
        return out


class _ParamikoMarks(logging.Handler):
    """Marks a step when paramiko logs the line that ends it."""

    def __init__(self, steps: Steps):
        super().__init__(logging.DEBUG)
        self.steps = steps

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        for text, step in PARAMIKO_MARKS:
            if text in msg:
                self.steps.mark(step)


def fleetops_steps(proxy, host, params: ConnParams, n: int, stdin: bytes | None, session: bool) -> Steps:
    steps = Steps(proxy, host)
    log = logging.getLogger("paramiko.transport")
    handler = _ParamikoMarks(steps)
    log.addHandler(handler)
    level = log.level
    log.setLevel(logging.DEBUG)
    ssh = SSHTransport(params)
    conn = HostSession(ssh, run_id=f"wan-steps-{os.getpid()}") if session else ssh
    try:
        steps.mark("tcp")
        conn.connect()
        steps.mark("auth")
        for i in range(n):
            r = conn.run("cat" if stdin else f"echo step{i}", stdin=stdin)
            if r.rc != 0:
                raise SystemExit(f"command {i + 1} failed: rc {r.rc}: {r.stderr!r}")
            steps.mark(f"command {i + 1}")
    finally:
        conn.close()
        log.removeHandler(handler)
        log.setLevel(level)
    return steps


def ssh_steps(proxy, host, params: ConnParams, stdin: bytes | None) -> Steps:
    """One `ssh -v` connection running one command, its steps marked as its debug lines come."""
    steps = Steps(proxy, host)
    cmd = ["ssh", "-v", "-F", "/dev/null", "-o", "ControlMaster=no", "-o", "ControlPath=none",
           "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={params.known_hosts}",
           "-o", "IdentitiesOnly=yes", "-i", str(params.key_file), "-p", str(params.port),
           f"{params.user}@{params.address}", "cat" if stdin else "echo step0"]
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if stdin:
        p.stdin.write(stdin)
    p.stdin.close()
    for raw in p.stderr:
        line = raw.decode("utf-8", "replace")
        for text, step in SSH_MARKS:
            if text in line:
                steps.mark(step)
    out = p.stdout.read()
    if p.wait() != 0 or not out:
        raise SystemExit(f"ssh failed: rc {p.returncode}")
    steps.mark("command 1")
    return steps


def table(rtt: float, fo: Steps, ssh: Steps) -> None:
    fo_rows, ssh_rows = fo.rows(rtt), {s: (d, w) for s, d, w in ssh.rows(rtt)}
    print("| step | fleetops: trips | fleetops: wall/RTT | ssh: trips | ssh: wall/RTT |")
    print("|---|---|---|---|---|")
    for step, d, w in fo_rows:
        sd, sw = ssh_rows.get(step, ("", ""))
        if step.startswith("command") and step != "command 1":
            sd, sw = "(a new connection)", ""
        print(f"| {step} | {d} | {w} | {sd} | {sw} |")
    ssh_total = ssh.marks[-1][2] if ssh.marks else 0
    print(f"| total | {fo.marks[-1][2]} | {round(fo.marks[-1][1] / rtt)} | {ssh_total} (1 command) "
          f"| {round(ssh.marks[-1][1] / rtt)} |")
    print("(a real link adds 1 round trip to each total: the TCP handshake, which the proxy does not delay)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtt-ms", type=float, default=50.0, help="round-trip time of the proxy's link")
    ap.add_argument("--commands", type=int, default=3, help="commands fleetops runs on its one connection")
    ap.add_argument("--stdin", action="store_true", help="give every command a line on stdin, as payloads have")
    ap.add_argument("--session", action="store_true", help="through HostSession: the run lock taken first")
    ap.add_argument("--lab-dir", default="/var/tmp/fleetops-bench-wan-steps-lab")
    opts = ap.parse_args()
    rtt = opts.rtt_ms / 1000
    stdin = b"a line on stdin\n" if opts.stdin else None
    lab = make_lab(1, opts.lab_dir, prefix="fowst")
    host = json.load(open(lab.json_path))["hosts"][0]
    work = tempfile.mkdtemp(prefix="fleetops-bench-wan-steps-")
    try:
        with DelayProxy({host["name"]: host["port"]}, rtt / 2) as proxy:
            inv = write_inventories(lab, proxy, work)
            params = ConnParams(name=host["name"], address="127.0.0.1", port=proxy.ports[host["name"]],
                                user=host["user"], key_file=lab.key_path, known_hosts=inv["known_hosts"])
            proxy.reset_counts()
            fo = fleetops_steps(proxy, host["name"], params, opts.commands, stdin, opts.session)
            proxy.reset_counts()
            ssh = ssh_steps(proxy, host["name"], params, stdin)
        print(f"one lab host, {opts.rtt_ms:g} ms RTT, {opts.commands} commands"
              f"{', stdin on each' if stdin else ''}{', through HostSession (run lock)' if opts.session else ''}")
        table(rtt, fo, ssh)
    finally:
        lab.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
