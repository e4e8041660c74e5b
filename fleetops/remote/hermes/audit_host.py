"""What the host is and offers the audit and its operator: architecture, OS, kernel, this
python's SQLite (FTS5, trigram, a sqlite3 shell whose .recover works), the systemd user
manager's hermes units, and whether gateway.pid points at a live gateway. The host's sqlite3 may lack `.recover`; a pid file may
outlive its gateway or name a reused pid.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from typing import Any, Dict, Optional

from fleetops.remote.hermes import holders as hermes_holders


def os_release(path: str = "/etc/os-release") -> Optional[Dict[str, Optional[str]]]:
    """{id, version, name} from os-release (ID, VERSION_ID, PRETTY_NAME), or None where there is none."""
    fields: Dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                k, sep, v = line.strip().partition("=")
                if sep and k in ("ID", "VERSION_ID", "PRETTY_NAME", "NAME"):
                    fields[k] = v.strip().strip("\"'")[:120]
    except OSError:
        return None
    return {"id": fields.get("ID"), "version": fields.get("VERSION_ID"),
            "name": fields.get("PRETTY_NAME") or fields.get("NAME")}


def system() -> Dict[str, Any]:
    """What the host is: architecture, OS and release, kernel, this python and its SQLite (the
    field's aarch64 Oracle A1 hosts and Debian 12's SQLite 3.40.1 behave differently)."""
    u = os.uname()
    return {"arch": u.machine, "os": os_release() or os_release("/usr/lib/os-release"),
            "kernel": u.release, "system": u.sysname, "python": "%d.%d.%d" % sys.version_info[:3],
            "sqlite": sqlite3.sqlite_version}


def host_tooling() -> Dict[str, Any]:
    """What this host's python/sqlite can do: FTS5, trigram, a sqlite3 shell and whether its .recover works."""
    out: Dict[str, Any] = {"python": "%d.%d.%d" % sys.version_info[:3], "python_executable": sys.executable,
                           "sqlite_version": sqlite3.sqlite_version, "fts5": False, "trigram": False,
                           "dbstat": False, "sqlite3_shell": None, "shell_version": None, "recover": None,
                           "notes": [], "system": system()}
    mem = sqlite3.connect(":memory:")
    try:
        for key, sql in (("fts5", "CREATE VIRTUAL TABLE f USING fts5(x)"),
                         ("trigram", "CREATE VIRTUAL TABLE g USING fts5(x, tokenize='trigram')"),
                         ("dbstat", "SELECT count(*) FROM dbstat")):
            try:
                mem.execute(sql).fetchall()
                out[key] = True
            except sqlite3.Error:
                pass
    finally:
        mem.close()
    if not out["fts5"]:
        out["notes"].append("no FTS5 in this python's SQLite: FTS tables cannot be checked")
    elif not out["trigram"]:
        out["notes"].append("no trigram tokenizer (SQLite %s < 3.34): trigram FTS tables cannot be opened"
                            % sqlite3.sqlite_version)
    shell = shutil.which("sqlite3")
    out["sqlite3_shell"] = shell
    if shell is None:
        out["recover"] = "no sqlite3 shell"
        out["notes"].append("no sqlite3 shell on the host")
        return out
    tmp = tempfile.mkdtemp(prefix="fleetops-audit-")
    try:
        try:
            v = subprocess.run([shell, "-version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
            out["shell_version"] = v.stdout.decode("utf-8", "replace").split(" ")[0].strip() or None
        except (OSError, subprocess.SubprocessError) as exc:
            out["shell_version"] = None
            out["notes"].append("sqlite3 -version failed: %s" % exc)
        tiny = os.path.join(tmp, "tiny.db")
        c = sqlite3.connect(tiny)
        c.execute("CREATE TABLE probe(x TEXT)")
        c.execute("INSERT INTO probe VALUES ('fleetops-recover-marker')")
        c.commit()
        c.close()
        try:
            r = subprocess.run([shell, tiny, ".recover"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=30, cwd=tmp)
            text = r.stdout.decode("utf-8", "replace")
            if r.returncode == 0 and "fleetops-recover-marker" in text:
                out["recover"] = "works"
            else:
                err = (r.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[0]
                out["recover"] = "fails: %s" % err[:200]
                out["notes"].append("sqlite3 .recover does not work here (%s)" % err[:120])
        except (OSError, subprocess.SubprocessError) as exc:
            out["recover"] = "fails: %s" % exc
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def services() -> Dict[str, Any]:
    """systemd user manager: does it answer, and the hermes* units it knows."""
    out: Dict[str, Any] = {"user_manager": None, "detail": None, "units": {}}
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        out["user_manager"] = "no systemctl"
        return out
    env = dict(os.environ)
    run_dir = "/run/user/%d" % os.getuid()
    if not env.get("XDG_RUNTIME_DIR") and os.path.isdir(run_dir):
        env["XDG_RUNTIME_DIR"] = run_dir
    base = [systemctl, "--user", "--no-pager", "--no-legend", "--plain"]
    try:
        r = subprocess.run(base + ["list-units", "--all", "hermes*"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=15, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        out["user_manager"] = "not answering"
        out["detail"] = str(exc)
        return out
    if r.returncode != 0:
        out["user_manager"] = "not answering"
        out["detail"] = (r.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[0][:200]
        return out
    out["user_manager"] = "answering"
    for line in r.stdout.decode("utf-8", "replace").splitlines():
        parts = line.split(None, 4)
        if len(parts) >= 4:
            out["units"][parts[0]] = {"load": parts[1], "active": parts[2], "sub": parts[3], "enabled": None}
    try:
        r = subprocess.run(base + ["list-unit-files", "hermes*"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=15, env=env)
        for line in r.stdout.decode("utf-8", "replace").splitlines():
            parts = line.split()
            if len(parts) >= 2:
                u = out["units"].setdefault(parts[0], {"load": None, "active": "inactive", "sub": None})
                u["enabled"] = parts[1]
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def gateway_pid(home: str) -> Optional[Dict[str, Any]]:
    """gateway.pid (JSON) pointing at a live gateway, a stale pid, or a reused one."""
    path = os.path.join(home, "gateway.pid")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(65536)
    except OSError:
        return None
    try:
        data = json.loads(text)
        pid = int(data["pid"]) if isinstance(data, dict) else int(data)
    except (ValueError, KeyError, TypeError):
        try:
            pid, data = int(text.strip()), {}
        except ValueError:
            return {"pid": None, "state": "unreadable pid file"}
    info = hermes_holders.process_info(pid)
    out: Dict[str, Any] = {"pid": pid, "state": None}
    if info is None or info["state"] == "Z":
        out["state"] = "stale (no such process)"
    elif isinstance(data, dict) and data.get("start_time") not in (None, info["start_time"]):
        out["state"] = "stale (pid reused by %s)" % (" ".join(info["cmdline"])[:80] or "?")
    else:
        kind = hermes_holders.classify(info["cmdline"])
        out["state"] = "live" if kind == "gateway" else "live (pid is a %s process)" % kind
    state_file = os.path.join(home, "gateway_state.json")
    try:
        with open(state_file, encoding="utf-8") as f:
            out["gateway_state_says"] = json.load(f).get("gateway_state")
    except (OSError, ValueError, AttributeError):
        pass
    return out
