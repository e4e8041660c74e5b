"""sshd_config of a lab host (or of several hosts sharing one sshd, each port its own user's).

Probes once whether this sshd knows PerSourcePenalties (OpenSSH >= 9.8), which would otherwise
throttle the failing logins tests make on purpose.
"""
from __future__ import annotations

import os
import subprocess

# Hermes offline; and its live-system guard off: Hermes 0.20.1+ refuses to open ~/.hermes/state.db
# from a process with a pytest ancestor, which every session of a suite-started sshd has (the
# lab users' homes are the suite's own)
LAB_ENV = ("HERMES_DISABLE_LAZY_INSTALLS=1 TIRITH_ENABLED=0 "
           "HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 HERMES_STATE_DB_GUARD_BYPASS=1")

_penalties_supported: bool | None = None     # of this machine's sshd, probed once per process


def config_text(h: dict, penalties: bool, shared: list | None = None) -> str:
    """sshd_config for host `h`, or (shared) for several hosts on one sshd, each port its own user's."""
    members = shared or [h]
    lines = [f"Port {m['port']}" for m in members] + [
        "ListenAddress 127.0.0.1",
        f"HostKey {h['host_key']}",
        "PidFile none",
        "UsePAM no",
        "PermitRootLogin no",
        "PubkeyAuthentication yes",
        "AuthorizedKeysFile .ssh/authorized_keys",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "AllowUsers " + " ".join(m["user"] for m in members),
        "MaxStartups 200",
        "MaxSessions 200",
        "LoginGraceTime 60",
        "StrictModes yes",
        "X11Forwarding no",
        "AllowTcpForwarding yes",
        "PrintMotd no",
        f"SetEnv {LAB_ENV}",
        "Subsystem sftp internal-sftp",
    ]
    if penalties:
        lines.append("PerSourcePenalties no")   # OpenSSH >= 9.8 would throttle failing tests
    if shared:                                  # Match blocks last: they run to the end of the file
        for m in shared:
            lines += [f"Match LocalPort {m['port']}", f"  AllowUsers {m['user']}"]
    return "\n".join(lines) + "\n"


def write_config(sshd: str, h: dict, shared: list | None = None) -> None:
    """Write h["config"] (0644), with PerSourcePenalties off where this sshd knows it."""
    global _penalties_supported
    if _penalties_supported is None:
        with open(h["config"], "w") as f:
            f.write(config_text(h, True, shared))
        r = subprocess.run([sshd, "-t", "-f", h["config"]], capture_output=True, text=True)
        _penalties_supported = r.returncode == 0 or "PerSourcePenalties" not in r.stderr
    with open(h["config"], "w") as f:
        f.write(config_text(h, _penalties_supported, shared))
    os.chmod(h["config"], 0o644)
