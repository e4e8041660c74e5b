"""Client keys for the lab tests: a key authorized on a lab host for the length of a test, and an
ssh-agent of the test's own."""
from __future__ import annotations

import contextlib
import os
import subprocess
import time


@contextlib.contextmanager
def authorized_key(h: dict, pub: str):
    """Public key line `pub` in lab host `h`'s authorized_keys until the block ends."""
    ak = os.path.join(h["home"], ".ssh", "authorized_keys")
    with open(ak, "a") as f:
        f.write(pub + "\n")
    try:
        yield
    finally:
        with open(ak) as f:
            keep = [line for line in f.read().splitlines() if line.strip() != pub]
        with open(ak, "w") as f:
            f.write("".join(line + "\n" for line in keep))


@contextlib.contextmanager
def ssh_agent(tmp_path):
    """Yield the socket of an ssh-agent started for the block (stopped by its own PID after)."""
    sock = str(tmp_path / "agent.sock")
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        yield sock
    finally:
        agent.terminate()
        agent.wait()
