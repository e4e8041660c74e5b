"""ansible-core, run as a subprocess, as the oracle fleetops' inventory and playbook reading is compared with.

Each call runs in an empty scratch directory with its own ANSIBLE_HOME and no ansible.cfg, so
nothing on the machine changes what ansible-core reads; only the ini and yaml inventory plugins
are enabled (the two formats fleetops reads) and an unparsable source is an error, not a warning.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

BIN = os.path.dirname(sys.executable)


def available() -> bool:
    return os.path.exists(os.path.join(BIN, "ansible-inventory"))


def _env(home: str, extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_HOME=home, ANSIBLE_CONFIG=os.path.join(home, "none.cfg"),
               ANSIBLE_INVENTORY_ENABLED="ini,yaml", ANSIBLE_INVENTORY_UNPARSED_FAILED="1",
               ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="1", ANSIBLE_NOCOLOR="1",
               ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_HOST_PATTERN_MISMATCH="ignore", ANSIBLE_PYTHON_INTERPRETER="auto_silent",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    env.update(extra or {})
    return env


def run(tool: str, *args: str, env: dict | None = None, cwd: str | None = None) -> subprocess.CompletedProcess:
    """Run an ansible-core command line tool; returns the completed process (never raises on rc)."""
    with tempfile.TemporaryDirectory(prefix="fo-ansible-") as home:
        return subprocess.run([os.path.join(BIN, tool), *args], cwd=cwd or home, env=_env(home, env),
                              capture_output=True, text=True, timeout=120)


def inventory_list(path: str) -> dict:
    """`ansible-inventory -i PATH --list` as data; raises RuntimeError when ansible-core refuses the file."""
    p = run("ansible-inventory", "-i", os.path.abspath(path), "--list")
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"rc {p.returncode}")
    return json.loads(p.stdout)


def membership(listing: dict) -> dict:
    """host -> sorted group names (every group it is in, directly or through children, but `all`),
    which is what ansible-core gives a host as `group_names`."""
    groups = {k: v for k, v in listing.items() if k != "_meta"}

    def hosts_of(name, seen=()):
        g = groups.get(name, {})
        out = set(g.get("hosts", []))
        for child in g.get("children", []):
            if child not in seen:
                out |= hosts_of(child, seen + (name,))
        return out
    out: dict = {h: set() for h in hosts_of("all")}
    for name in groups:
        if name == "all":
            continue
        for h in hosts_of(name):
            out.setdefault(h, set()).add(name)
    return {h: sorted(gs) for h, gs in out.items()}


def list_hosts(inventory: str, pattern: str) -> list:
    """`ansible PATTERN --list-hosts`: the hosts ansible-core selects, in its order."""
    p = run("ansible", "-i", os.path.abspath(inventory), pattern, "--list-hosts")
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip() or p.stdout.strip())
    lines = p.stdout.splitlines()
    return [line.strip() for line in lines[1:] if line.strip()]   # first line: "  hosts (N):"


def select_many(items: list, hash_seed: str = "0") -> list:
    """ansible-core's InventoryManager over [{"inventory", "patterns"}] in one process (oracle_api.py)."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "oracle_api.py")
    items = [dict(item, inventory=os.path.abspath(item["inventory"])) for item in items]
    with tempfile.TemporaryDirectory(prefix="fo-ansible-") as home:
        p = subprocess.run([sys.executable, script], input=json.dumps(items), cwd=home,
                           env=_env(home, {"PYTHONHASHSEED": hash_seed}),
                           capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-2000:])
    return json.loads(p.stdout)


def task_messages(stdout: str) -> dict:
    """{task or handler name: {host: debug msg}} from ansible-playbook's default output (a role's task is
    named without its `role : ` prefix)."""
    out: dict = {}
    task = host = None
    for line in stdout.splitlines():
        m = re.match(r"^(?:TASK|RUNNING HANDLER) \[(?:[^\]]+? : )?(.+?)\]", line)
        if m:
            task, host = m.group(1), None
            continue
        m = re.match(r"^ok: \[([^\]]+)\] => \{", line)
        if m:
            host = m.group(1)
            continue
        m = re.match(r'^\s+"msg": (".*")$', line)
        if m and task and host:
            out.setdefault(task, {})[host] = json.loads(m.group(1))
    return out


LOCAL_H1 = "all:\n  hosts:\n    h1: {ansible_connection: local, ansible_python_interpreter: /usr/bin/python3}\n"


def write_project(directory, playbook: str, inventory: str = LOCAL_H1, files: dict | None = None) -> None:
    """pb.yml, inv.yml and the other files (relative path -> text) under `directory`."""
    import textwrap
    from pathlib import Path
    d = Path(directory)
    for rel, text in {**(files or {}), "inv.yml": textwrap.dedent(inventory),
                      "pb.yml": textwrap.dedent(playbook)}.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)


def run_project(directory, *extra: str) -> subprocess.CompletedProcess:
    """ansible-playbook on the project write_project wrote."""
    d = str(directory)
    return run("ansible-playbook", "-i", os.path.join(d, "inv.yml"), os.path.join(d, "pb.yml"), *extra, cwd=d)


def playbook_messages(directory, playbook: str, inventory: str, files: dict | None = None, *extra: str) -> dict:
    """Write a project (playbook, inventory, other files) under `directory`, run ansible-playbook on
    it and return task_messages of its output; a failed run raises with the output's tail."""
    write_project(directory, playbook, inventory, files)
    p = run_project(directory, *extra)
    if p.returncode != 0:
        raise AssertionError(p.stdout[-3000:] + p.stderr[-2000:])
    return task_messages(p.stdout)
