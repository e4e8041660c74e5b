"""A lab host's sshd started again on a port of its own with its config edited: for the tests that
need a server the lab does not run (other host keys, other session limits), same user and keys."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import time


@contextlib.contextmanager
def own_sshd(h: dict, tmp_path, edit=lambda text: text):
    """Yield the port of an sshd for lab host `h` whose config is the host's, `edit`ed; it answers
    with its banner before this yields and is stopped (by its own PID) after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with open(h["config"]) as f:
        text = f.read().replace(f"Port {h['port']}", f"Port {port}")
    cfg = tmp_path / "sshd_config"
    cfg.write_text(edit(text))
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-f", str(cfg), "-E", str(tmp_path / "log")])
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                    if c.recv(8).startswith(b"SSH-"):
                        break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait()
