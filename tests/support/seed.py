"""Seed lab hosts for the repair play: damaged stores and live Hermes holders, as each lab user.

Used by tests/repair_lab and by scripts/demo_seed.py. Everything runs as the host's own Unix
user (`runuser -u USER`, HOME and HERMES_HOME set, detached with setsid), exactly as Hermes
runs on a real host, so the payloads (which run as that user over SSH) see real holders:

- `hermes gateway run`            the real gateway from a hermes-agent 0.19.0 venv
- `hermes serve --isolated`       desktop-style backend: a supervisor respawns it after a kill
- `hermes chat` writer            a real hermes_state.SessionDB appending messages, logging each
                                  committed message so a test can prove none was lost
- `sqlite3 state.db`              a stray shell (not Hermes: the repair must refuse)

Every process started is recorded (PID and process group) in a JSON registry; `stop_all`
kills exactly those by PID (and, for homes it seeded, whatever now holds their state.db, e.g.
a gateway fleetops restarted), never by name.
"""
from __future__ import annotations

import glob
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from fleetops.remote.hermes import holders as hermes_holders  # noqa: E402
from tests.support import hermes_matrix  # noqa: E402

HERMES_ENV = {
    "HERMES_DISABLE_LAZY_INSTALLS": "1",
    "TIRITH_ENABLED": "0",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    # Hermes 0.20.1+ refuses ~/.hermes/state.db under a pytest ancestor; these homes are the lab's
    "HERMES_STATE_DB_GUARD_BYPASS": "1",
}
SIDECARS = ("", "-wal", "-shm")

HOLDER_PY = r'''
import signal, sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], timeout=5)
conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    time.sleep(3600)
'''

# Runs as `exec -a "hermes chat" VENV/bin/python writer.py DB LOG INTERVAL`: the renamed argv[0]
# hides the venv from Python, so its site-packages are put on sys.path by hand.
WRITER_PY = r'''
import glob, os, signal, sys, time, uuid
venv = os.environ["FLEETOPS_SEED_VENV"]
sys.path[:0] = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages"))
from pathlib import Path
from hermes_state import SessionDB
db_path, log_path, interval = sys.argv[1], sys.argv[2], float(sys.argv[3])
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
log = open(log_path, "a", buffering=1)
sid = "fleetops_writer_" + uuid.uuid4().hex[:8]
db = None
i = 0
while True:
    try:
        if db is None:
            db = SessionDB(db_path=Path(db_path))
            db.create_session(sid, "cli", model="test-model")
            log.write("session %s\n" % sid)
        text = "writer %s message %d about sqlite snapshots" % (sid, i)
        db.append_message(sid, "user", content=text)
        log.write("committed %s\n" % text)
        i += 1
    except Exception as exc:  # a damaged store refuses some writes: Hermes carries on, so do we
        log.write("error %s: %s\n" % (type(exc).__name__, exc))
        try:
            db and db.close()
        except Exception:
            pass
        db = None
        time.sleep(1.0)
    time.sleep(interval)
'''


def find_venv() -> Path | None:
    """A hermes-agent venv whose python a lab user can run (root's pyenv is not reachable)."""
    cands = [os.environ.get("FLEETOPS_LAB_HERMES_VENV"), "/opt/fleetops-test/hermes-venv-shared",
             os.environ.get("FLEETOPS_HERMES_VENV"), "/opt/fleetops-test/hermes-venv"]
    for c in cands:
        if not c:
            continue
        py = Path(c) / "bin" / "python"
        if not py.exists():
            continue
        try:
            real = Path(os.path.realpath(py))
        except OSError:
            continue
        # every directory up to the interpreter must be traversable by others
        ok = all(os.stat(p).st_mode & 0o001 for p in [*real.parents][:-1]) and os.stat(real).st_mode & 0o001
        if ok:
            return Path(c)
    return None


class Seeder:
    """Seeds lab hosts; `registry` (a JSON file) lists every process started, for stop_all()."""

    def __init__(self, lab, registry: str | os.PathLike, venv: Path | None = None):
        self.lab = lab
        self.registry = Path(registry)
        self.venv = Path(venv) if venv else find_venv()
        self.procs: list[dict] = []
        self.homes: list[str] = []
        self.mounts: list[str] = []
        self._popens: dict[int, subprocess.Popen] = {}
        if self.registry.exists():
            data = json.loads(self.registry.read_text())
            self.procs, self.homes, self.mounts = data.get("procs", []), data.get("homes", []), data.get("mounts", [])

    @property
    def hermes(self) -> str:
        return str(self.venv / "bin" / "hermes")

    def _save(self):
        self.registry.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.registry.with_suffix(".tmp")
        tmp.write_text(json.dumps({"procs": self.procs, "homes": self.homes, "mounts": self.mounts}, indent=1))
        os.replace(tmp, self.registry)

    # ---- hosts and files ---------------------------------------------------------------------
    def host(self, name, profile=None) -> dict:
        """The host's user and Hermes paths; with a named profile, `db` is that profile's store."""
        h = next(x for x in self.lab.hosts if x["name"] == name)
        pw = pwd.getpwnam(h["user"])
        root = os.path.join(pw.pw_dir, ".hermes")
        phome = root if profile in (None, "default") else os.path.join(root, "profiles", profile)
        return {"name": name, "user": h["user"], "home": pw.pw_dir, "uid": pw.pw_uid, "gid": pw.pw_gid,
                "hermes": root, "profile_home": phome, "db": os.path.join(phome, "state.db")}

    def _own(self, h, path, mode):
        os.chown(path, h["uid"], h["gid"])
        os.chmod(path, mode)

    def wipe(self, name):
        """Remove ~/.hermes (and what the seeder put beside it); refuses while a mount is inside."""
        h = self.host(name)
        for m in list(self.mounts):
            if m.startswith(h["hermes"] + "/"):
                self.unmount(m)
        for p in (h["hermes"], os.path.join(h["home"], ".fleetops-seed")):
            if os.path.isdir(p):
                shutil.rmtree(p)
        return h

    def seed_image(self, name, src, profile=None) -> dict:
        """Put the image at src (state.db and whichever sidecars exist) at ~/.hermes/state.db
        (or that profile's state.db)."""
        h = self.host(name, profile)
        for d in (h["hermes"], os.path.dirname(h["profile_home"]), h["profile_home"]):
            os.makedirs(d, exist_ok=True)
            self._own(h, d, 0o700)
        for s in SIDECARS:
            dst = h["db"] + s
            if os.path.lexists(dst):
                os.unlink(dst)
            if os.path.exists(str(src) + s):
                shutil.copyfile(str(src) + s, dst)
                self._own(h, dst, 0o600)
        if h["home"] not in self.homes:
            self.homes.append(h["home"])
            self._save()
        return h

    def _scripts(self, h) -> str:
        d = os.path.join(h["home"], ".fleetops-seed")
        os.makedirs(d, exist_ok=True)
        self._own(h, d, 0o700)
        for fname, text in (("holder.py", HOLDER_PY), ("writer.py", WRITER_PY)):
            p = os.path.join(d, fname)
            with open(p, "w") as f:
                f.write(text)
            self._own(h, p, 0o600)
        return d

    def small_fs(self, name, size="1m") -> str:
        """A small tmpfs on ~/.hermes/fleetops (owned by the user): the repair has no room there."""
        h = self.host(name)
        target = os.path.join(h["hermes"], "fleetops")
        os.makedirs(target, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700,uid={h['uid']},gid={h['gid']}",
                        "fleetops-seed", target], check=True)
        self.mounts.append(target)
        self._save()
        return target

    def unmount(self, target):
        subprocess.run(["umount", target], check=False)
        if target in self.mounts:
            self.mounts.remove(target)
            self._save()

    # ---- processes ---------------------------------------------------------------------------
    def _env(self, h) -> dict:
        env = {"HOME": h["home"], "USER": h["user"], "LOGNAME": h["user"], "SHELL": "/bin/bash",
               "PATH": "/usr/local/bin:/usr/bin:/bin", "HERMES_HOME": h["hermes"], "LANG": "C.UTF-8"}
        env.update(HERMES_ENV)
        if self.venv:
            env["FLEETOPS_SEED_VENV"] = str(self.venv)
        return env

    def _spawn(self, h, kind, script, log_name, stdin=subprocess.DEVNULL) -> subprocess.Popen:
        """bash -c script as the user, in its own session (setsid); recorded before returning."""
        logs = os.path.join(h["hermes"], "logs")
        os.makedirs(logs, exist_ok=True)
        self._own(h, logs, 0o700)
        log_path = os.path.join(logs, log_name)
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchown(fd, h["uid"], h["gid"])
        env_args = [f"{k}={v}" for k, v in self._env(h).items()]
        cmd = ["runuser", "-u", h["user"], "--", "env", "-i", *env_args, "bash", "-c", script]
        p = subprocess.Popen(cmd, cwd=h["hermes"], stdin=stdin, stdout=fd, stderr=fd, start_new_session=True)
        os.close(fd)
        self._popens[p.pid] = p
        self.procs.append({"host": h["name"], "kind": kind, "pid": p.pid, "pgid": p.pid, "log": log_path})
        self._save()
        return p

    def holders(self, name, kind=None, profile=None) -> list:
        h = self.host(name, profile)
        hs = hermes_holders.scan(h["db"])["holders"]
        return [x for x in hs if kind is None or x["kind"] == kind]

    def wait_holder(self, name, kind, timeout=180.0, pid=None, what=None, profile=None) -> dict:
        end = time.monotonic() + timeout
        while True:
            hs = [x for x in self.holders(name, kind, profile) if pid is None or x["pid"] == pid]
            if hs:
                return hs[0]
            if time.monotonic() > end:
                raise AssertionError(f"{name}: no {kind} holder of state.db after {timeout:.0f}s ({what or ''})")
            time.sleep(0.25)

    def gateway(self, name, timeout=240.0, profile=None, venv=None) -> int:
        """A real `hermes gateway run`; returns its PID once it holds state.db. With `venv` (another
        Hermes version's venv), that version's gateway as its systemd unit runs it:
        `python -m hermes_cli.main [--profile P] gateway run`."""
        h = self.host(name, profile)
        if not self.venv:
            raise RuntimeError("no hermes-agent venv runnable by the lab users (scripts/hermes-venv.sh with "
                               "PYTHON=/usr/bin/python3 FLEETOPS_HERMES_VENV=/opt/fleetops-test/hermes-venv-shared)")
        prof = f" --profile {profile}" if profile not in (None, "default") else ""
        if os.path.isdir(h["profile_home"]):
            self._own(h, str(hermes_matrix.keep_history(h["profile_home"])), 0o600)
        if venv is not None:
            cmd = f"exec {venv}/bin/python -m hermes_cli.main{prof} gateway run"
        else:
            cmd = f"exec {self.hermes}{prof} gateway run"
        p = self._spawn(h, "gateway", cmd, f"seed-gateway-{profile or 'default'}.log")
        return self.wait_holder(name, "gateway", timeout, what=f"gateway started as PID {p.pid}",
                                profile=profile)["pid"]

    def desktop(self, name, respawns=2, delay=1.0) -> int:
        """`hermes serve --isolated` holders, respawned `delay` s after each dies, 1 + respawns times."""
        h = self.host(name)
        d = self._scripts(h)
        n = 1 + respawns
        script = (f'i=0; while [ $i -lt {n} ]; do (exec -a "hermes serve --isolated" /usr/bin/python3 '
                  f'{d}/holder.py {h["db"]}); i=$((i+1)); sleep {delay}; done')
        self._spawn(h, "desktop-supervisor", script, "seed-desktop.log")
        return self.wait_holder(name, "desktop-serve", 60)["pid"]

    def desktop_app(self, name, backends=1, delay=(1.0, 3.0), interval=0.3) -> str:
        """The Desktop app double (tests/support/holder.py): `backends` `hermes serve --isolated`
        processes with HERMES_DESKTOP=1, each restarted delay[0]..delay[1] s after it dies, for as
        long as the app runs (forever); returns its log (spawned / opened PID INODE / committed TEXT)."""
        h = self.host(name)
        d = self._scripts(h)
        src = (HERE / "holder.py").read_text()
        bin_dir = os.path.join(d, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        self._own(h, bin_dir, 0o700)
        exe = os.path.join(bin_dir, "hermes")
        with open(exe, "w") as f:
            f.write("#!%s/bin/python\n%s" % (self.venv, src))
        self._own(h, exe, 0o700)
        app = os.path.join(d, "desktop-app.py")
        with open(app, "w") as f:
            f.write(src)
        self._own(h, app, 0o600)
        log = os.path.join(d, "desktop-app.log")
        self._spawn(h, "desktop-app", f"exec /usr/bin/python3 {app} app {exe} {h['db']} {log} --backends {backends} "
                    f"--delay-min {delay[0]} --delay-max {delay[1]} --interval {interval}", "seed-desktop-app.log")
        end = time.monotonic() + 120
        while not (os.path.exists(log) and open(log).read().count("opened ") >= backends):
            if time.monotonic() > end:
                raise AssertionError(f"{name}: the desktop backends never opened state.db: "
                                     f"{open(log).read()[-800:] if os.path.exists(log) else 'no log'}")
            time.sleep(0.2)
        return log

    def writer(self, name, interval=0.2, require_commit=True, venv=None) -> str:
        """A Hermes writer (`hermes chat` by its command line) appending messages through the real
        SessionDB of `venv` (another version's venv; default the seeder's); returns its log path.
        require_commit: wait for its first committed message (a damaged store may refuse every write)."""
        h = self.host(name)
        d = self._scripts(h)
        log = os.path.join(d, "writer.log")
        venv = venv or self.venv
        script = (f'FLEETOPS_SEED_VENV={venv} exec -a "hermes chat" {venv}/bin/python {d}/writer.py '
                  f'{h["db"]} {log} {interval}')
        self._spawn(h, "writer", script, "seed-writer.log")
        end = time.monotonic() + 120
        while require_commit and not (os.path.exists(log) and "committed" in open(log).read()):
            if time.monotonic() > end:
                raise AssertionError(f"{name}: the writer committed nothing: "
                                     f"{open(log).read()[-500:] if os.path.exists(log) else 'no log'}")
            time.sleep(0.2)
        return log

    def sqlite_shell(self, name) -> int:
        """A stray `sqlite3 state.db` shell of the user, stdin kept open; returns the shell's PID."""
        h = self.host(name)
        p = self._spawn(h, "sqlite3", f"exec sqlite3 {h['db']}", "seed-sqlite3.log", stdin=subprocess.PIPE)
        p.stdin.write(b"SELECT count(*) FROM sessions;\n")
        p.stdin.flush()
        return self.wait_holder(name, "sqlite-shell", 60)["pid"]

    # ---- teardown ----------------------------------------------------------------------------
    def stop_all(self) -> list[int]:
        """Kill every recorded process group, then whatever still holds a seeded state.db
        (a gateway fleetops restarted); unmount what was mounted. Returns the PIDs signalled."""
        killed = []
        for pr in self.procs:
            try:
                os.killpg(pr["pgid"], signal.SIGKILL)
                killed.append(pr["pid"])
            except (ProcessLookupError, PermissionError):
                pass
            p = self._popens.pop(pr["pid"], None)
            if p is not None:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
        for home in self.homes:
            # the default profile and every named one (a restarted profile gateway holds its own)
            phomes = [os.path.join(home, ".hermes")] + sorted(glob.glob(os.path.join(home, ".hermes", "profiles", "*")))
            for _ in range(3):
                pids = []
                for ph in phomes:
                    db = os.path.join(ph, "state.db")
                    hs = hermes_holders.scan(db)["holders"] if os.path.exists(db) else []
                    pids += [x["pid"] for x in hs if x.get("user") == os.path.basename(home)]
                    try:
                        pids.append(int(json.load(open(os.path.join(ph, "gateway.pid")))["pid"]))
                    except (OSError, ValueError, KeyError, TypeError):
                        pass
                alive = [p for p in set(pids) if hermes_holders.alive(p)
                         and (hermes_holders.process_info(p) or {}).get("user") == os.path.basename(home)]
                if not alive:
                    break
                for pid in alive:
                    try:
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                    except ProcessLookupError:
                        pass
                time.sleep(0.3)
        for m in list(self.mounts):
            self.unmount(m)
        self.procs = []
        self._save()
        return killed
