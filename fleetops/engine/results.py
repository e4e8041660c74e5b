"""The central results store: every run, host and task result in one SQLite file.

`<results_dir>/runs.db` is opened in WAL mode with a busy timeout and every write
is one short `BEGIN IMMEDIATE` transaction, so two fleetops processes can record
runs into the same file at once without corrupting it or failing on a lock.
Everything written is masked (secret-named keys) and scrubbed (known secret
values), so the file can be shared and grepped without leaking credentials.
"""
from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import secrets as _pysecrets
import socket
import sqlite3
import threading
import time
from pathlib import Path

from fleetops.engine import results_backend as _backend
from fleetops.engine.clean import clean, clean_options, clean_per_host, scrub_text
from fleetops.engine.events import EventSink
from fleetops.engine.results_schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION
from fleetops.engine.recap import COUNTERS, increments, result_status

DEFAULT_RESULTS_DIR = "fleetops-runs"
DB_NAME = "runs.db"
BUSY_TIMEOUT_MS = _backend.BUSY_TIMEOUT_MS
BATCH_ROWS = 200        # task results written in one transaction at most; every task's are written
BATCH_SECONDS = 0.5     # before the next task starts, and none waits longer than this



def new_run_id() -> str:
    """Sortable by time (UTC) and unique across concurrent runs: "YYYYmmddTHHMMSSZ-<6 hex>"."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + _pysecrets.token_hex(3)


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, default=str, sort_keys=False)


# --- controller process liveness -----------------------------------------------------------

def _proc_start(pid: int) -> str | None:
    """Kernel start time of a process: tells a live controller from a reused PID."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    fields = data[data.rfind(")") + 2:].split()
    if not fields or fields[0] in ("Z", "X"):
        return None                 # a zombie is a dead controller
    return fields[19] if len(fields) > 19 else ""


def pid_alive(pid: int | None, start: str | None) -> bool:
    if not pid:
        return False
    if os.path.isdir("/proc/self"):
        now = _proc_start(pid)
        if now is None:
            return False
        return not start or now == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_row(row) -> dict:
    """A runs row as a dict: options and stats decoded, a dead controller's "running" shown as interrupted."""
    run = dict(row)
    run["options"] = json.loads(run["options"]) if run.get("options") else {}
    run["stats"] = json.loads(run["stats"]) if run.get("stats") else None
    run["recorded_status"] = run["status"]
    run["status_note"] = None
    if run["status"] == "running":
        if run.get("controller_host") and run["controller_host"] != socket.gethostname():
            run["status_note"] = f"running on {run['controller_host']}, or ended there without a record"
        elif not pid_alive(run.get("controller_pid"), run.get("controller_pid_start")):
            run["status"] = "interrupted"
            run["status_note"] = "no end recorded"
    run["duration"] = (run["ended"] - run["started"]) if run.get("ended") and run.get("started") else None
    return run


def host_dir_path(results_dir, run_id: str, host: str) -> Path:
    """`<results_dir>/<run-id>/<host>/` with both names made safe as path components."""
    safe = re.sub(r"[^A-Za-z0-9._@-]", "_", str(host)).lstrip(".") or "_"
    run_safe = re.sub(r"[^A-Za-z0-9._-]", "_", str(run_id)).lstrip(".") or "_"
    return Path(results_dir) / run_safe / safe


# --- the store -----------------------------------------------------------------------------

class ResultsStore(EventSink):
    """Event listener that records a run into the central results; also the query API.

    The database is `<results_dir>/runs.db`, or the PostgreSQL database at `db_url`
    (results_backend); fetched files go under `results_dir` either way. One connection per
    store, guarded by a lock because executor worker threads deliver events concurrently;
    task results are written in batches (BATCH_ROWS, BATCH_SECONDS). A write failure (disk
    full, ...) does not stop the run: it is kept in `write_error` for the CLI to report once.
    """

    def __init__(self, results_dir: str | os.PathLike | None = None,
                 secret_values: set | None = None, create: bool = True, db_url: str | None = None):
        self.results_dir = Path(results_dir or DEFAULT_RESULTS_DIR)
        self.db_url = db_url
        # what may be shown: the file, or the URL without its password
        self.db_path: str | Path = _backend.redact(db_url) if db_url else self.results_dir / DB_NAME
        self.secret_values = set(secret_values or ())
        if db_url:
            self.secret_values |= _backend.url_secrets(db_url)
        self.run_id: str | None = None
        self.write_error: Exception | None = None
        self._lock = threading.RLock()
        self._pending: list = []
        self._flush_timer: threading.Timer | None = None
        if create:
            self.results_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        elif not db_url and not Path(self.db_path).exists():
            raise FileNotFoundError(2, "no results store here (no run recorded yet)", str(self.db_path))
        self._conn = self._open()
        self._init_schema()

    def _open(self, readonly: bool = False):
        if self.db_url:
            return _backend.PgConnection(self.db_url)
        return _backend.open_sqlite(Path(self.db_path), readonly=readonly)

    @property
    def location(self) -> str:
        """Where the runs are, as it may be shown (never with a password)."""
        return str(self.db_path)

    # -- plumbing --

    def _init_schema(self) -> None:
        """Create the tables, or bring an older store's up to SCHEMA_VERSION (MIGRATIONS), once."""
        with self._tx() as c:
            if isinstance(c, _backend.PgConnection):
                c.prepare_schema()
            have = c.execute("SELECT name FROM sqlite_master WHERE name='schema_version'").fetchone()
            version = None
            if have:
                row = c.execute("SELECT version FROM schema_version").fetchone()
                version = row[0] if row else None
                if version is not None and version > SCHEMA_VERSION:
                    raise OSError(0, f"results store schema {version} is newer than this fleetops ({SCHEMA_VERSION})",
                                  str(self.db_path))
            if version == SCHEMA_VERSION:
                return
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    c.execute(stmt)
            for v in range((version or SCHEMA_VERSION) + 1, SCHEMA_VERSION + 1):
                for stmt in MIGRATIONS.get(v, ()):
                    c.execute(stmt)
            c.execute("DELETE FROM schema_version")
            c.execute("INSERT INTO schema_version(version) VALUES (?)", (SCHEMA_VERSION,))

    @contextlib.contextmanager
    def _tx(self):
        """One short immediate transaction on the store's own connection."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                with contextlib.suppress(*_backend.store_errors()):
                    self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")

    def _write(self, fn, *args) -> None:
        """Run one write (after the task results waiting for their batch, so the order holds);
        remember the first failure instead of breaking the run."""
        if fn is not self._write_results and self._pending:
            self.flush()
        try:
            with self._tx() as c:
                fn(c, *args)
        except (*_backend.store_errors(), OSError) as exc:
            if self.write_error is None:
                self.write_error = exc

    @contextlib.contextmanager
    def connect(self):
        """A separate connection with the store's settings, for other code (audit tables).

        Commits when the block ends without an exception, rolls back otherwise.
        """
        conn = self._open()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def extra_table(self, ddl: str) -> None:
        """Create extra tables/indexes in runs.db (idempotent DDL, e.g. CREATE TABLE IF NOT EXISTS)."""
        with self._tx() as c:
            for stmt in ddl.split(";"):
                if stmt.strip():
                    c.execute(stmt)

    def close(self) -> None:
        self.flush()
        with self._lock:
            with contextlib.suppress(*_backend.store_errors()):
                self._conn.close()

    def clean(self, obj):
        return clean(obj, self.secret_values)

    def clean_options(self, options) -> dict:
        """Run options: clean each value, but keep the option names themselves
        (`accept_new_host_keys` is a flag, not a key to hide)."""
        return clean_options(options, self.secret_values)

    def text(self, s):
        return scrub_text(s if s is None or isinstance(s, str) else str(s), self.secret_values)

    def host_dir(self, run_id: str, host: str) -> str:
        """`<results_dir>/<run-id>/<host>/` (0700) for fetched files and reports."""
        path = host_dir_path(self.results_dir, run_id, host)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)
        return str(path)

    # -- events --

    def run_start(self, run_id, playbook, inventory, options):
        self.run_id = run_id
        pid = os.getpid()
        try:
            user = getpass.getuser()
        except Exception:
            user = str(os.getuid())
        from fleetops import __version__

        def w(c):
            c.execute(
                "INSERT INTO runs(id, started, status, playbook, inventory, options, controller_user,"
                " controller_host, controller_pid, controller_pid_start, fleetops_version)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (run_id, time.time(), "running", self.text(str(playbook)), self.text(str(inventory)),
                 _dumps(self.clean_options(options)), user, socket.gethostname(), pid,
                 _proc_start(pid), __version__))
        self._write(w)

    def play_start(self, play_index, play_name, hosts):
        now = time.time()

        def w(c):
            c.execute("INSERT OR REPLACE INTO plays(run_id, play_index, name, hosts, started) VALUES (?,?,?,?,?)",
                      (self.run_id, play_index, self.text(play_name), _dumps(list(hosts)), now))
            for h in hosts:
                c.execute("INSERT INTO run_hosts(run_id, host, first_seen, last_seen) VALUES (?,?,?,?)"
                          " ON CONFLICT(run_id, host) DO NOTHING", (self.run_id, h, now, now))
        self._write(w)

    def task_start(self, play_index, task_index, task_name, module, hosts):
        """The previous task's results are in the store before the next task begins."""
        self.flush()

    def batch_start(self, play_index, batch_index, hosts):
        def w(c):
            c.execute("INSERT OR REPLACE INTO batches(run_id, play_index, batch_index, hosts, started)"
                      " VALUES (?,?,?,?,?)",
                      (self.run_id, play_index, batch_index, _dumps(list(hosts)), time.time()))
        self._write(w)

    def host_result(self, host, play_index, task_index, task_name, module, result, started, ended):
        result = result or {}
        status = result_status(result)
        incs = increments(result)
        clean_result = self.clean(result)
        msg = clean_result.get("msg") if isinstance(clean_result, dict) else None
        duration = result.get("duration")
        if duration is None and started is not None and ended is not None:
            duration = ended - started
        row = (self.run_id, host, play_index, task_index, self.text(task_name), self.text(module), status,
               None if msg is None else str(msg), started, ended, duration, _dumps(clean_result))
        with self._lock:
            self._pending.append((row, incs))
            full = len(self._pending) >= BATCH_ROWS
            if not full and self._flush_timer is None:
                self._flush_timer = threading.Timer(BATCH_SECONDS, self.flush)
                self._flush_timer.daemon = True
                self._flush_timer.start()
        if full:
            self.flush()

    def flush(self) -> None:
        """Write the task results that wait for their batch, in one transaction."""
        with self._lock:
            rows, self._pending = self._pending, []
            timer, self._flush_timer = self._flush_timer, None
            if timer is not None:
                timer.cancel()
            if rows:
                self._write(self._write_results, rows)

    @staticmethod
    def _write_results(c, rows: list) -> None:
        c.executemany(
            "INSERT INTO task_results(run_id, host, play_index, task_index, task_name, module, status,"
            " msg, started, ended, duration, result) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", [r for r, _ in rows])
        per_host: dict = {}
        for r, incs in rows:
            counts = per_host.setdefault((r[0], r[1]), {})
            counts["last_seen"] = max(counts.get("last_seen", 0.0), r[9] or time.time())
            for k in incs:
                counts[k] = counts.get(k, 0) + 1
        for (run_id, h), counts in per_host.items():
            last = counts.pop("last_seen")
            c.execute("INSERT INTO run_hosts(run_id, host, first_seen, last_seen) VALUES (?,?,?,?)"
                      " ON CONFLICT(run_id, host) DO UPDATE SET last_seen=excluded.last_seen", (run_id, h, last, last))
            if counts:
                sets = ", ".join(f"{k} = {k} + ?" for k in counts)
                c.execute(f"UPDATE run_hosts SET {sets} WHERE run_id=? AND host=?", (*counts.values(), run_id, h))

    def host_facts(self, host, facts):
        now = time.time()

        def w(c):
            c.execute("INSERT INTO run_hosts(run_id, host, facts, first_seen, last_seen) VALUES (?,?,?,?,?)"
                      " ON CONFLICT(run_id, host) DO UPDATE SET facts=excluded.facts, last_seen=excluded.last_seen",
                      (self.run_id, host, _dumps(self.clean(facts or {})), now, now))
        self._write(w)

    def play_end(self, play_index, stopped_reason):
        def w(c):
            c.execute("UPDATE plays SET ended=?, stopped_reason=? WHERE run_id=? AND play_index=?",
                      (time.time(), self.text(stopped_reason), self.run_id, play_index))
        self._write(w)

    def run_end(self, status, stats, exit_code):
        """Final status, plus the executor's own counters, which win over the incremental ones."""
        now = time.time()
        stats = clean_per_host(stats, self.secret_values)

        def w(c):
            c.execute("UPDATE runs SET ended=?, status=?, exit_code=?, stats=? WHERE id=?",
                      (now, status, exit_code, _dumps(stats), self.run_id))
            for host, counters in stats.items():
                if not isinstance(counters, dict):
                    continue
                vals = {k: int(counters.get(k, 0) or 0) for k in COUNTERS}
                c.execute("INSERT INTO run_hosts(run_id, host, first_seen, last_seen) VALUES (?,?,?,?)"
                          " ON CONFLICT(run_id, host) DO NOTHING", (self.run_id, host, now, now))
                c.execute(f"UPDATE run_hosts SET {', '.join(f'{k}=?' for k in COUNTERS)}"
                          " WHERE run_id=? AND host=?", (*vals.values(), self.run_id, host))
        self._write(w)

    def mark_interrupted(self, run_id: str | None = None, exit_code: int = 130) -> None:
        """Second Ctrl-C: record the end now, before the process leaves without cleanup.

        Uses its own connection: it runs inside a signal handler, possibly while this
        thread is in the middle of one of the store's own transactions.
        """
        rid = run_id or self.run_id
        if not rid:
            return
        with self._lock:
            pending, self._pending = self._pending, []
        try:
            conn = self._open()
            try:
                conn.execute("PRAGMA busy_timeout=5000")
                if pending:
                    conn.execute("BEGIN IMMEDIATE")
                    self._write_results(conn, pending)
                    conn.execute("COMMIT")
                conn.execute("UPDATE runs SET ended=?, status='interrupted', exit_code=?"
                             " WHERE id=? AND status='running'", (time.time(), exit_code, rid))
            finally:
                conn.close()
        except (*_backend.store_errors(), OSError):
            pass

    # -- queries --

    def _run_row(self, row) -> dict:
        return run_row(row)

    def list_runs(self, limit: int = 20) -> list[dict]:
        """Newest first."""
        with self._lock:
            rows = self._conn.execute("SELECT * FROM runs ORDER BY started DESC, id DESC LIMIT ?",
                                      (int(limit),)).fetchall()
        return [self._run_row(r) for r in rows]

    def resolve_run_id(self, run_id: str | None) -> str | None:
        """"latest"/None → newest run; otherwise an exact id or a unique prefix."""
        with self._lock:
            if not run_id or run_id == "latest":
                row = self._conn.execute("SELECT id FROM runs ORDER BY started DESC, id DESC LIMIT 1").fetchone()
                return row[0] if row else None
            row = self._conn.execute("SELECT id FROM runs WHERE id=?", (run_id,)).fetchone()
            if row:
                return row[0]
            rows = self._conn.execute("SELECT id FROM runs WHERE substr(id, 1, ?) = ? LIMIT 2",
                                      (len(run_id), run_id)).fetchall()
            return rows[0][0] if len(rows) == 1 else None

    def get_run(self, run_id: str | None = "latest") -> dict | None:
        """A run with its hosts, plays (with batches) and task results; None when unknown."""
        rid = self.resolve_run_id(run_id)
        if rid is None:
            return None
        with self._lock:
            c = self._conn
            c.execute("BEGIN")
            try:
                row = c.execute("SELECT * FROM runs WHERE id=?", (rid,)).fetchone()
                hosts = c.execute("SELECT * FROM run_hosts WHERE run_id=? ORDER BY host", (rid,)).fetchall()
                plays = c.execute("SELECT * FROM plays WHERE run_id=? ORDER BY play_index", (rid,)).fetchall()
                batches = c.execute("SELECT * FROM batches WHERE run_id=? ORDER BY play_index, batch_index",
                                    (rid,)).fetchall()
                tasks = c.execute("SELECT * FROM task_results WHERE run_id=? ORDER BY play_index, task_index,"
                                  " id", (rid,)).fetchall()
            finally:
                c.execute("COMMIT")
        run = self._run_row(row)
        run["results_dir"] = str(self.results_dir)
        run["db_path"] = str(self.db_path)
        run["open_store"] = self._open           # a new connection to this run's store (report readers)
        run["hosts"] = []
        for h in hosts:
            d = dict(h)
            d["facts"] = json.loads(d["facts"]) if d.get("facts") else {}
            run["hosts"].append(d)
        run["plays"] = []
        by_play = {}
        for p in plays:
            d = dict(p)
            d["hosts"] = json.loads(d["hosts"]) if d.get("hosts") else []
            d["batches"] = []
            by_play[d["play_index"]] = d
            run["plays"].append(d)
        for b in batches:
            play = by_play.get(b["play_index"])
            if play is not None:
                play["batches"].append(json.loads(b["hosts"]) if b["hosts"] else [])
        run["tasks"] = []
        for t in tasks:
            d = dict(t)
            d["result"] = json.loads(d["result"]) if d.get("result") else {}
            d.pop("id", None)
            run["tasks"].append(d)
        return run


def integrity_ok(db_path: str | os.PathLike) -> bool:
    """PRAGMA integrity_check on a results store: used by tests and `fleetops report` sanity checks."""
    conn = sqlite3.connect(str(db_path), timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()

