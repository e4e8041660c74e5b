"""Fixtures for the repair payloads: real Hermes homes, real `hermes gateway run`, real holder processes.

Every process a test starts is registered in `procs` and killed by its PID at teardown
(never by name). Hermes runs offline from /opt/fleetops-test/hermes-venv with HERMES_HOME
pointing at the test's temp home, so the real ~/.hermes is never touched.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.sqlite import fence as sqlite_fence
from tests.corpus import build
from tests.support import hermes_matrix

REPO = Path(__file__).resolve().parents[2]
VENV = build.VENV
HERMES = VENV / "bin" / "hermes"
VPY = VENV / "bin" / "python"
HOLDER = Path(__file__).with_name("holder.py")
# a plain holder: one SQLite connection kept open until killed (for refusals, check mode)
PLAIN_HOLDER = ("import signal, sqlite3, sys, time\n"
                "conn = sqlite3.connect(sys.argv[1], timeout=5)\n"
                "conn.execute('SELECT count(*) FROM sqlite_master').fetchone()\n"
                "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
                "while True:\n"
                "    time.sleep(3600)\n")


def hermes_env(home) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(build.HERMES_ENV)
    env["HERMES_HOME"] = str(home)
    return env


def wait_for(pred, timeout=120.0, what="condition", interval=0.2):
    """Poll pred() until truthy; fail the test naming what never happened (a bound, not a timing claim)."""
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(interval)


def fence_keepers(root) -> list:
    """Live fence keepers recorded under a Hermes root (they hold state.db only to lock it)."""
    out = []
    for rec in Path(root).glob("fleetops/state/*-fence.json"):
        out += [k for k in json.loads(rec.read_text()).get("keepers") or [] if sqlite_fence.alive(k)]
    return out


def holders(db, kind=None):
    keep = {k["pid"] for k in fence_keepers(Path(db).parent)}
    hs = hermes_holders.scan(str(db), exclude_pids=keep)["holders"]
    return [h for h in hs if kind is None or h["kind"] == kind]


class Procs:
    """Processes started by a test, killed by PID (process group for supervisors) at teardown."""

    def __init__(self):
        self.popens = []
        self.pids = []

    def add(self, p):
        self.popens.append(p)
        return p

    def add_pid(self, pid):
        if pid:
            self.pids.append(pid)

    def cleanup(self):
        for p in self.popens:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)  # started with start_new_session: its own group
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    p.kill()
                except ProcessLookupError:
                    pass
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        for pid in self.pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture
def procs():
    p = Procs()
    yield p
    p.cleanup()


@pytest.fixture(scope="session")
def std_image(tmp_path_factory, std_src):
    """The standard store (tests/conftest.py), a copy of this suite's own."""
    p = tmp_path_factory.mktemp("repair-std") / "state.db"
    build.copy_image(std_src, p)
    return p


@pytest.fixture(scope="session")
def image_of(tmp_path_factory, std_image):
    """image_of(version) -> the standard store written by that Hermes version (skips with the
    install command when its venv is absent); the oldest version's is std_image."""
    from tests.support import hermes_matrix
    made = {hermes_matrix.OLDEST: std_image}

    def make(version):
        if version not in made:
            try:
                build.venv_python(version)
            except build.HermesVenvMissing as exc:
                pytest.skip(str(exc))
            p = tmp_path_factory.mktemp("repair-std-%s" % version) / "state.db"
            build.standard_db(p, hermes=version)
            made[version] = p
        return made[version]

    return make


@pytest.fixture(scope="session")
def wal_image(tmp_path_factory, std_image):
    """The same database with a committed conversation only in its WAL (three-file image)."""
    p = tmp_path_factory.mktemp("repair-wal") / "state.db"
    build.realistic_db(p, keep_wal=True, **build.STANDARD)
    assert Path(str(p) + "-wal").stat().st_size > 0
    return p


@pytest.fixture
def home(tmp_path, std_image):
    """A Hermes root (HERMES_HOME, profile default) holding a copy of the realistic state.db."""
    root = tmp_path / "hermes"
    root.mkdir(mode=0o700)
    build.copy_image(std_image, root / "state.db")
    return root


def start_gateway(procs, root, timeout=180.0, hermes=HERMES):
    """A real `hermes gateway run` (of the Hermes command `hermes`) on root; returns once it
    holds state.db (history pruning off: hermes_matrix.keep_history)."""
    hermes_matrix.keep_history(root)
    log = open(root.parent / "gateway-test.log", "ab")
    p = procs.add(subprocess.Popen([str(hermes), "gateway", "run"], cwd=str(root), env=hermes_env(root),
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True))
    log.close()

    def ready():
        if p.poll() is not None:
            raise AssertionError("gateway exited %s: %s" % (
                p.returncode, (root.parent / "gateway-test.log").read_text()[-2000:]))
        return [h for h in holders(root / "state.db") if h["pid"] == p.pid]   # whatever its kind
    wait_for(ready, timeout, "the gateway to hold state.db")
    return p


def start_desktop(procs, db, respawns=2, delay=1.0):
    """A supervisor shell loop (the Desktop app's stand-in) that runs `hermes serve --isolated`
    holders one after another: 1 + respawns of them, each restarted `delay` s after it dies."""
    import shlex
    n = 1 + respawns if respawns >= 0 else 1000000
    script = ('i=0; while [ $i -lt %d ]; do (exec -a "hermes serve --isolated" %s -c %s %s); i=$((i+1)); '
              'sleep %s; done' % (n, sys.executable, shlex.quote(PLAIN_HOLDER), db, delay))
    p = procs.add(subprocess.Popen(["bash", "-c", script], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    wait_for(lambda: holders(db, "desktop-serve"), 60, "the desktop-serve holder")
    return p


def install_desktop_double(bin_dir, venv=VENV, name="hermes"):
    """holder.py as a `hermes` console script of the venv (so /proc shows `python .../hermes serve ...`)."""
    bin_dir = Path(bin_dir)
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / name
    exe.write_text("#!%s\n%s" % (Path(venv) / "bin" / "python", HOLDER.read_text()))
    exe.chmod(0o755)
    return exe


class DesktopApp:
    """The Desktop app double (tests/support/holder.py): backends respawned forever; its log."""

    def __init__(self, popen, log):
        self.popen = popen
        self.log = Path(log)

    def lines(self, word):
        if not self.log.exists():
            return []
        return [ln.split(" ", 1)[1] for ln in self.log.read_text().splitlines() if ln.startswith(word + " ")]

    def spawned(self):
        return [int(x) for x in self.lines("spawned")]

    def committed(self):
        return self.lines("committed")

    def opened(self):
        """[(pid, inode of state.db it opened)]"""
        return [tuple(int(v) for v in x.split()) for x in self.lines("opened")]


def start_desktop_app(procs, db, backends=1, delay=(0.5, 3.0), interval=0.3, venv=VENV, name="hermes",
                      primary=False):
    """The Desktop app double: `backends` `hermes serve --isolated` processes (the first one the
    primary `serve --host 127.0.0.1 --port 0` if primary), each restarted delay[0]..delay[1] s
    after it dies, for as long as the app runs; returns once they hold db."""
    db = Path(db)
    exe = install_desktop_double(db.parent.parent / "desktop-app-bin", venv, name)
    log = db.parent.parent / "desktop-app.log"
    cmd = [sys.executable, str(HOLDER), "app", str(exe), str(db), str(log), "--backends", str(backends),
           "--delay-min", str(delay[0]), "--delay-max", str(delay[1]), "--interval", str(interval)] + (
               ["--primary"] if primary else [])
    p = procs.add(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=hermes_env(db.parent), start_new_session=True))
    app = DesktopApp(p, log)
    wait_for(lambda: len(app.lines("opened")) >= backends, 120, "the desktop backends to open state.db")
    return app


def start_logging_writer(procs, db, interval=0.1, venv=VENV):
    """A real Hermes writer (`hermes chat` by its command line, hermes_state.SessionDB) that logs
    every message it committed; returns the log path once it committed one."""
    from tests.support.seed import WRITER_PY
    db = Path(db)
    d = db.parent.parent
    script, log = d / "writer.py", d / "writer.log"
    script.write_text(WRITER_PY)
    env = dict(hermes_env(db.parent), FLEETOPS_SEED_VENV=str(venv))
    procs.add(subprocess.Popen(["bash", "-c", 'exec -a "hermes chat" "$0" "$@"', str(Path(venv) / "bin" / "python"),
                                str(script), str(db),
                                str(log), str(interval)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env, start_new_session=True))
    wait_for(lambda: log.exists() and "committed" in log.read_text(), 120, "the writer's first commit")
    return log


def start_sqlite_shell(procs, db):
    """A stray `sqlite3` shell with the database open (stdin kept open so it stays)."""
    p = procs.add(subprocess.Popen(["sqlite3", str(db)], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True))
    p.stdin.write(b"SELECT count(*) FROM sessions;\n")
    p.stdin.flush()
    wait_for(lambda: holders(db, "sqlite-shell"), 60, "the sqlite3 shell to hold state.db")
    return p


def start_writer(procs, db, interval=0.05):
    """A real Hermes writer (hermes_state.SessionDB in the hermes venv) appending messages."""
    code = (
        "import sys, time, uuid\n"
        "from pathlib import Path\n"
        "from hermes_state import SessionDB\n"
        "db = SessionDB(db_path=Path(sys.argv[1]))\n"
        "sid = 'fleetops_writer_' + uuid.uuid4().hex[:8]\n"
        "db.create_session(sid, 'cli', model='test-model')\n"
        "i = 0\n"
        "while True:\n"
        "    db.append_message(sid, 'user', content='writer message number %d about sqlite snapshots' % i)\n"
        "    i += 1\n"
        "    if i == 1: print(i, flush=True)\n"
        "    time.sleep(float(sys.argv[2]))\n")
    p = procs.add(subprocess.Popen([str(VPY), "-c", code, str(db), str(interval)], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, env=hermes_env(Path(db).parent),
                                   start_new_session=True))
    wait_for(lambda: p.stdout.readline().strip() or p.poll() is not None, 60, "the writer's first message")
    assert p.poll() is None, p.stderr.read().decode()[-2000:]
    return p


def args_for(root, **kw):
    a = {"hermes_home": str(root), "profile": "default"}
    a.update(kw)
    return a


def run_payload_subprocess(module, args, user=None, timeout=600, inject="", inject_into=None):
    """main(args) of fleetops.remote.<module> (a dotted path) in a fresh python3 (optionally as another user);
    `inject` is test source run first in the namespace of module `inject_into` (default `module`;
    tests/support/fault_injection.py)."""
    import json
    code = ("import importlib,json,sys; m = importlib.import_module('fleetops.remote.%s'); "
            "exec(sys.argv[2], importlib.import_module('fleetops.remote.%s').__dict__); "
            "r = m.main(json.loads(sys.argv[1])); print('RESULT ' + json.dumps(r, default=repr))"
            % (module, inject_into or module))
    cmd = [sys.executable, "-c", code, json.dumps(args), inject]
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    p = subprocess.run(cmd, cwd=str(REPO), capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
    return p.returncode, res, p.stderr
