"""ansible-core's own integration targets, run as ansible-test runs a role target, once with
ansible-playbook and once with fleetops, and compared.

The targets come from ansible-core's sdist on PyPI (pinned version and sha256), fetched with pip
into a cache; only test/integration/ is extracted, with the sdist's COPYING (GPLv3) beside it.
Each target runs as ansible-test's `command_integration_role` runs it: a playbook in the
integration directory, `hosts: testhost`, `gather_facts` from the target's aliases (else true),
`vars: {output_dir}`, `roles: [<target>]`, the targets directory as roles path, and `testhost`
on the local connection. Every run has its own HOME, TMPDIR and output_dir.
FLEETOPS_TARGETS_SRC=<dir> runs the fleetops package found there (another commit's tree).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import DATA

VERSION = "2.19.14"
SHA256 = "1e7612788eaa6b3c87a3670ce86c64b830eba0ae2b3fcb25a772f276704163b4"
SDIST = f"ansible_core-{VERSION}.tar.gz"
LIST = DATA / "ansible_targets" / "targets.txt"
BIN = os.path.dirname(sys.executable)
TIMEOUT = 600


def cache_dir() -> Path:
    return Path(os.environ.get("FLEETOPS_TEST_CACHE", Path.home() / ".cache" / "fleetops-test"))


def listed() -> list:
    """The target names of targets.txt, in its order."""
    out = []
    for line in LIST.read_text().splitlines():
        name = line.split("#", 1)[0].strip()
        if name:
            out.append(name)
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sdist() -> Path:
    """The pinned sdist in the cache, downloaded with pip when missing; its sha256 is checked."""
    root = cache_dir()
    path = root / SDIST
    if not path.exists():
        root.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "-d", str(root), f"ansible-core=={VERSION}"],
                       check=True, capture_output=True, text=True, timeout=600)
    digest = _sha256(path)
    if digest != SHA256:
        raise RuntimeError(f"{path}: sha256 {digest}, expected {SHA256}")
    return path


def integration_dir() -> Path:
    """test/integration of the sdist, extracted once into the cache with COPYING beside it."""
    dest = cache_dir() / f"ansible-core-{VERSION}-integration"
    done = dest / ".extracted"
    if done.exists():
        return dest / "integration"
    src = sdist()
    tmp = Path(tempfile.mkdtemp(prefix="extract-", dir=cache_dir()))
    prefix = f"ansible_core-{VERSION}/"
    with tarfile.open(src) as tar:
        members = [m for m in tar.getmembers()
                   if m.name.startswith(prefix + "test/integration/") or m.name == prefix + "COPYING"]
        tar.extractall(tmp, members=members, filter="data")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    os.rename(tmp / prefix / "test" / "integration", dest / "integration")
    os.rename(tmp / prefix / "COPYING", dest / "COPYING")
    shutil.rmtree(tmp)
    done.write_text(VERSION + "\n")
    return dest / "integration"


def _aliases(target: Path) -> list:
    path = target / "aliases"
    if not path.exists():
        return []
    return [line.split("#", 1)[0].strip() for line in path.read_text().splitlines() if line.strip()]


def playbook(name: str, output_dir: str) -> list:
    """The play ansible-test writes for a role target."""
    aliases = _aliases(integration_dir() / "targets" / name)
    gather = "gather_facts/no/" not in aliases
    return [{"hosts": "testhost", "gather_facts": gather, "vars_files": [],
             "vars": {"output_dir": output_dir}, "roles": [name]}]


@dataclass
class Outcome:
    passed: bool
    reason: str = ""          # the first failure, one line
    traceback: bool = False


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _ansible_reason(out: str) -> str:
    for line in out.splitlines():
        m = re.match(r"^(?:fatal|failed): \[[^\]]+\].*?=> (.*)$", line)
        if m:
            try:
                msg = json.loads(m.group(1)).get("msg", m.group(1))
            except ValueError:
                msg = m.group(1)
            return _one_line(msg)
        if line.startswith(("ERROR!", "[ERROR]")):
            return _one_line(line)
    return _one_line(out.strip().splitlines()[-1] if out.strip() else "no output")


def _fleetops_reason(proc: subprocess.CompletedProcess) -> str:
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        tail = (proc.stderr or proc.stdout).strip().splitlines()
        return _one_line(tail[-1] if tail else f"exit {proc.returncode}")
    for play in doc.get("plays", []):
        for task in play.get("tasks", []):
            for res in task.get("results", {}).values():
                if res.get("status") in ("failed", "unreachable") and not res.get("ignored"):
                    r = res.get("result", {})
                    return _one_line(f"{task.get('name')}: {r.get('msg') or r.get('stderr') or res.get('status')}")
        if play.get("stopped_reason"):
            return _one_line(play["stopped_reason"])
    return _one_line(f"exit {doc.get('exit_code')} ({doc.get('status')})")


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "FLEETOPS_RESULTS"))}
    env.update(HOME=str(home), TMPDIR=str(home / "tmp"), ANSIBLE_HOME=str(home / ".ansible"),
               ANSIBLE_ROLES_PATH=str(integration_dir() / "targets"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_CONFIG=str(home / "none.cfg"), ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_FORCE_COLOR="0",
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))   # a target's own ansible-playbook calls
    if os.environ.get("FLEETOPS_TARGETS_SRC"):          # another checkout's fleetops (a base figure)
        env["PYTHONPATH"] = os.environ["FLEETOPS_TARGETS_SRC"]
    return env


def run(name: str, tool: str) -> Outcome:
    """Run one target with `tool` ("ansible" or "fleetops"); never raises on the tool's failure."""
    integ = integration_dir()
    with tempfile.TemporaryDirectory(prefix=f"fo-target-{tool}-") as scratch:
        home = Path(scratch)
        (home / "tmp").mkdir()
        out_dir = home / "output_dir"
        out_dir.mkdir()
        inv = home / "inventory"
        inv.write_text(f"testhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
        # ansible-test writes the playbook inside the integration directory (playbook_dir)
        fd, pb = tempfile.mkstemp(prefix=f"{name}-", suffix=".yml", dir=integ)
        with os.fdopen(fd, "w") as f:
            json.dump(playbook(name, str(out_dir)), f, indent=4)
        try:
            if tool == "ansible":
                cmd = [os.path.join(BIN, "ansible-playbook"), "-i", str(inv), pb]
            else:
                cmd = [sys.executable, "-m", "fleetops", "run", "-i", str(inv), "--json",
                       "--results", str(home / "runs"), pb]
            try:
                proc = subprocess.run(cmd, cwd=str(integ), env=_env(home), capture_output=True,
                                      text=True, timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                return Outcome(False, f"timed out after {TIMEOUT} s")
        finally:
            os.unlink(pb)
    traceback = "Traceback (most recent call last)" in proc.stderr
    if proc.returncode == 0:
        return Outcome(True, traceback=traceback)
    if tool == "ansible":
        return Outcome(False, _ansible_reason(proc.stdout + "\n" + proc.stderr), traceback)
    reason = _fleetops_reason(proc).replace(str(integ / "targets") + "/", "").replace("fleetops: error: ", "")
    return Outcome(False, f"exit {proc.returncode}: {reason}", traceback)


def compare(names: list, jobs: int = 1, echo=None, ansible: dict | None = None) -> dict:
    """name -> (ansible Outcome, fleetops Outcome), the two tools side by side per target;
    `ansible` (name -> Outcome, from an earlier run's save()) stands in for ansible-playbook's runs."""
    from concurrent.futures import ThreadPoolExecutor
    integration_dir()

    def one(name):
        known = (ansible or {}).get(name)
        pair = (known or run(name, "ansible"), run(name, "fleetops"))
        if echo:
            echo(name, *pair)
        return name, pair
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(pool.map(one, names))


def table(results: dict) -> str:
    """target | ansible | fleetops | first reason fleetops failed, and the figure under it."""
    width = max([len(n) for n in results] + [6])
    lines = [f"{'target':<{width}}  ansible  fleetops  first reason fleetops failed"]
    for name, (a, f) in results.items():
        mark = lambda o: ("pass" if o.passed else "FAIL") + ("+tb" if o.traceback else "")  # noqa: E731
        lines.append(f"{name:<{width}}  {mark(a):<7}  {mark(f):<8}  {'' if f.passed else f.reason}")
    lines.append(figure(results))
    return "\n".join(lines)


def figure(results: dict) -> str:
    ok = [n for n, (a, _) in results.items() if a.passed]
    both = [n for n in ok if results[n][1].passed]
    tb = [n for n, (_, f) in results.items() if f.traceback]
    pct = 100.0 * len(both) / len(ok) if ok else 0.0
    return (f"{len(results)} targets; {len(ok)} pass with ansible-playbook; of those {len(both)} pass "
            f"with fleetops ({pct:.0f}%); fleetops tracebacks: {len(tb)}")


def save(results: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump({n: {"ansible": vars(a), "fleetops": vars(b)} for n, (a, b) in results.items()}, f, indent=1)


def load(path: str) -> dict:
    with open(path) as f:
        doc = json.load(f)
    return {n: (Outcome(**d["ansible"]), Outcome(**d["fleetops"])) for n, d in doc.items()}
