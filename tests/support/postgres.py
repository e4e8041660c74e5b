"""A real PostgreSQL server for the results-store tests: Debian's `postgresql` package, a cluster
in a temporary directory owned by the `postgres` user, on a loopback port with password
(SCRAM) authentication, stopped and removed after the session by the suite itself.

`pg_url()` gives a fresh database on it for each test, as `postgresql://fleetops:PASSWORD@...`.
"""
from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile

import pytest

PASSWORD = "pg-" + secrets.token_hex(12)


def _bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if not found:
        pytest.fail(f"PostgreSQL's {name} not found under /usr/lib/postgresql/*/bin: scripts/setup.sh installs "
                    "Debian's postgresql package")
    return found[-1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, root: str, port: int):
        self.root, self.port = root, port
        self.data, self.sock, self.log = (os.path.join(root, d) for d in ("data", "sock", "server.log"))
        self._n = 0

    def as_postgres(self, *cmd, check=True) -> subprocess.CompletedProcess:
        return subprocess.run(["runuser", "-u", "postgres", "--", *cmd], capture_output=True, text=True,
                              check=check, timeout=120, cwd="/")

    def psql(self, sql: str) -> str:
        return self.as_postgres(_bin("psql"), "-h", self.sock, "-p", str(self.port), "-U", "postgres",
                                "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-Atc", sql).stdout

    def new_db(self) -> str:
        self._n += 1
        name = f"fleetops_{self._n}"
        self.psql(f"CREATE DATABASE {name} OWNER fleetops")
        return f"postgresql://fleetops:{PASSWORD}@127.0.0.1:{self.port}/{name}"


@contextlib.contextmanager
def running_server():
    """A started server (as root), stopped and removed when the block ends; the benches use it too."""
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise RuntimeError("no postgres user: scripts/setup.sh installs Debian's postgresql package") from None
    root = tempfile.mkdtemp(prefix="fleetops-pg-")
    os.chmod(root, 0o755)
    server = Server(root, _free_port())
    for d in (server.data, server.sock):
        os.mkdir(d, 0o700)
        shutil.chown(d, "postgres", "postgres")
    try:
        server.as_postgres(_bin("initdb"), "-D", server.data, "-U", "postgres", "--auth-local=trust",
                           "--auth-host=scram-sha-256", "-E", "UTF8")
        with open(server.log, "w"):
            pass
        shutil.chown(server.log, "postgres", "postgres")
        server.as_postgres(_bin("pg_ctl"), "-D", server.data, "-l", server.log, "-w", "-t", "60", "-o",
                           f"-k {server.sock} -p {server.port} -c listen_addresses=127.0.0.1 -c fsync=off",
                           "start")
        server.psql(f"CREATE ROLE fleetops LOGIN PASSWORD '{PASSWORD}'")
        yield server
    finally:
        if os.path.exists(os.path.join(server.data, "postmaster.pid")):
            server.as_postgres(_bin("pg_ctl"), "-D", server.data, "-m", "fast", "-w", "stop", check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres():
    if os.geteuid() != 0:
        pytest.skip("the PostgreSQL server is started as the postgres user, which needs root")
    try:
        with running_server() as server:
            yield server
    except RuntimeError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def pg_url(postgres) -> str:
    return postgres.new_db()
