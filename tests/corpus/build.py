"""Build realistic Hermes state.db files with the real hermes-agent, cached by parameters.

Why a subprocess: each Hermes version of the matrix (tests/hermes_matrix.txt) lives in its own
venv (its dependencies must not leak into the fleetops test environment); hermes_gen.py runs
there, with that version's own SessionDB, and reports metadata as JSON. ``hermes=`` picks the
version (default the oldest, 0.19.0); the cache key includes it.
Why a cache: a 40-session build takes seconds, the big preset minutes; every consumer gets a
copy, never the cached file (a test that damages its file must not poison the cache).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
GEN = HERE / "hermes_gen.py"
try:
    from tests.support import hermes_matrix
except ImportError:          # run as a script from tests/corpus
    import sys
    sys.path.insert(0, str(HERE.parent.parent))
    from tests.support import hermes_matrix
VENV = hermes_matrix.get(hermes_matrix.OLDEST).venv    # the default version's venv
CACHE = Path(os.environ.get("FLEETOPS_CORPUS_CACHE", "/var/tmp/fleetops-corpus-cache"))
SIDECARS = ("", "-wal", "-shm")
GEN_VERSION = 3  # bump when hermes_gen.py output changes, to invalidate the cache

HERMES_ENV = {
    "HERMES_DISABLE_LAZY_INSTALLS": "1",
    "TIRITH_ENABLED": "0",
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
}

# The database every default test copies: small enough to build in seconds, big enough
# that messages and the FTS shadow tables have interior pages and overflow chains, and
# with deleted sessions so every case also checks that nothing deleted comes back.
STANDARD = dict(sessions=40, messages_per_session=(60, 150), seed=1, deleted=4)
BIG = dict(sessions=400, messages_per_session=(40, 95), seed=7, deleted=6, long_prob=0.28)


class HermesVenvMissing(RuntimeError):
    pass


def venv_python(hermes: str = hermes_matrix.OLDEST) -> Path:
    v = hermes_matrix.get(hermes)
    py = v.venv / "bin" / "python"
    if not py.exists():
        raise HermesVenvMissing(f"Hermes {hermes} venv missing at {v.venv}: run {v.install_hint}")
    return py


def _run_gen(params: dict, home: Path) -> dict:
    params = dict(params)
    hermes = params.pop("hermes", hermes_matrix.OLDEST)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HERMES_ENV)
    env["HERMES_HOME"] = str(home)  # never touch the real ~/.hermes
    proc = subprocess.run([str(venv_python(hermes)), str(GEN), json.dumps(params)],
                          capture_output=True, text=True, env=env, cwd=str(home))
    if proc.returncode != 0:
        raise RuntimeError(f"hermes_gen failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def copy_image(src: Path, dst: Path) -> None:
    """Copy state.db with whichever of -wal/-shm exist (one image: never one file alone)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    for s in SIDECARS:
        if Path(str(dst) + s).exists():
            os.unlink(str(dst) + s)
    for s in SIDECARS:
        if Path(str(src) + s).exists():
            shutil.copyfile(str(src) + s, str(dst) + s)


def _key(params: dict) -> str:
    if params.get("hermes") == hermes_matrix.OLDEST:
        params = {k: v for k, v in params.items() if k != "hermes"}  # keeps the existing cache
    blob = json.dumps({**params, "gen": GEN_VERSION,
                       "gen_sha": hashlib.sha256(GEN.read_bytes()).hexdigest()}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _cached(params: dict, make) -> tuple[Path, dict]:
    """Return (cached state.db path, meta), building it with ``make(tmpdir) -> (db, meta)`` if absent."""
    CACHE.mkdir(parents=True, exist_ok=True)
    entry = CACHE / _key(params)
    meta_file = entry / "meta.json"
    if not meta_file.exists():
        tmp = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
        try:
            t0 = time.monotonic()
            db, meta = make(tmp)
            meta["build_seconds"] = round(time.monotonic() - t0, 2)
            meta["params"] = params
            final = tmp / "image"
            copy_image(db, final / "state.db")
            meta["size_bytes"] = {s or "db": Path(str(final / "state.db") + s).stat().st_size
                                  for s in SIDECARS if Path(str(final / "state.db") + s).exists()}
            (final / "meta.json").write_text(json.dumps(meta, indent=1))
            try:
                os.rename(final, entry)  # atomic publish; a concurrent builder may win
            except OSError:
                pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return entry / "state.db", json.loads(meta_file.read_text())


def realistic_db(path, sessions: int = 40, messages_per_session=(20, 90), seed: int = 1,
                 deleted: int = 0, titles: bool = True, tool_calls: bool = True, big: bool = False,
                 keep_wal: bool = False, hermes: str = hermes_matrix.OLDEST) -> dict:
    """Write a realistic Hermes state.db to ``path`` (plus -wal/-shm when ``keep_wal``); return its metadata.

    ``big=True`` selects the field-report size class (about 400 sessions, 27,000 messages,
    ~280 MB) regardless of the other size arguments. With ``keep_wal`` the image also holds a
    final conversation only in committed WAL frames (see hermes_gen.wal_tail). ``hermes`` is the
    version of the matrix whose SessionDB writes the file.
    """
    params = dict(sessions=sessions, messages_per_session=list(messages_per_session), seed=seed,
                  deleted=deleted, titles=titles, tool_calls=tool_calls, hermes=hermes)
    if big:
        params.update(BIG, messages_per_session=list(BIG["messages_per_session"]), big=True)

    def make_base(tmp: Path):
        db = tmp / "gen" / "state.db"
        db.parent.mkdir(parents=True)
        meta = _run_gen({**params, "mode": "build", "path": str(db)}, tmp)
        return db, meta

    base, meta = _cached(params, make_base)
    if keep_wal:
        wparams = {**params, "keep_wal": True}

        def make_wal(tmp: Path):
            work = tmp / "work" / "state.db"
            copy_image(base, work)
            wmeta = _run_gen({**params, "mode": "wal_tail", "path": str(work),
                              "out_dir": str(tmp / "snap")}, tmp)
            return tmp / "snap" / "state.db", {**meta, **wmeta, "base_build_seconds": meta["build_seconds"]}

        base, meta = _cached(wparams, make_wal)
    copy_image(base, Path(path))
    return dict(meta)


def _derive(src, dst, mode: str, snapshot: bool, hermes: str = hermes_matrix.OLDEST, **params) -> dict:
    """Copy ``src`` to ``dst`` after hermes_gen's ``mode`` ran on a copy of it with the real
    SessionDB of Hermes ``hermes`` (cached by src's content and the parameters). ``snapshot``:
    the mode copies the three files out while its connection is open (a live WAL image)."""
    src = Path(src)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:20]

    def make(tmp: Path):
        work = tmp / "work" / "state.db"
        copy_image(src, work)
        args = {"mode": mode, "path": str(work), "hermes": hermes, **params}
        if snapshot:
            args["out_dir"] = str(tmp / "snap")
        meta = _run_gen(args, tmp)
        return (tmp / "snap" / "state.db" if snapshot else work), meta

    cached, meta = _cached({"derived_from": digest, "mode": mode, "hermes": hermes, **params}, make)
    copy_image(cached, Path(dst))
    return dict(meta)


def add_wal_tail(src, dst, seed: int = 1, hermes: str = hermes_matrix.OLDEST) -> dict:
    """Copy ``src`` (a checkpointed image) to ``dst`` with an extra conversation left in the WAL."""
    return _derive(src, dst, "wal_tail", True, hermes=hermes, seed=seed)


def with_stale_wal(src, dst, seed: int = 1) -> dict:
    """Copy ``src`` (a checkpointed image) to ``dst`` as a live WAL image whose committed frames
    are followed by stale frames of an earlier generation (hermes_gen.wal_tail, stale)."""
    return _derive(src, dst, "wal_tail", True, seed=seed, stale=True)


def with_deleted_run(src, dst, run: int = 10) -> dict:
    """Copy ``src`` to ``dst`` with ``run`` consecutive sessions deleted by the real SessionDB
    (secure_delete=OFF): whole sessions and messages leaves freed, still readable."""
    return _derive(src, dst, "delete_run", False, run=run)


def later_state(src, dst, delete: str, retitle: dict) -> dict:
    """Copy ``src`` to ``dst`` after Hermes worked on: session ``delete`` deleted, each of
    ``retitle`` ({id: title}) resumed and titled (hermes_gen.later, with the real SessionDB
    of the version that wrote ``src``)."""
    return _derive(src, dst, "later", False, hermes=writer_of(src), delete=delete, retitle=retitle)


def writer_of(path) -> str:
    """The version of the matrix whose SessionDB writes the schema_version ``path`` holds."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        have = con.execute("SELECT version FROM schema_version").fetchone()[0]
    finally:
        con.close()
    for v in hermes_matrix.VERSIONS:
        def make(tmp: Path, version: str = v.version):
            db = tmp / "schema" / "state.db"
            db.parent.mkdir(parents=True)
            return db, _run_gen({"mode": "schema", "path": str(db), "hermes": version}, tmp)
        _db, meta = _cached({"mode": "schema", "hermes": v.version}, make)
        if meta["schema_version"] == have:
            return v.version
    raise ValueError(f"{path}: schema_version {have} is no version of the matrix")


def standard_db(path, hermes: str = hermes_matrix.OLDEST) -> dict:
    """The default corpus database (STANDARD parameters), written by that Hermes version."""
    return realistic_db(path, **STANDARD, hermes=hermes)


def meta_for(params: Optional[dict] = None) -> dict:
    """Metadata of a cached build without copying it (building it if needed)."""
    tmp = Path(tempfile.mkdtemp())
    try:
        return realistic_db(tmp / "state.db", **(params or STANDARD))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="build a corpus database and print its metadata")
    ap.add_argument("path")
    ap.add_argument("--big", action="store_true")
    ap.add_argument("--keep-wal", action="store_true")
    ap.add_argument("--sessions", type=int, default=STANDARD["sessions"])
    ap.add_argument("--deleted", type=int, default=STANDARD["deleted"])
    ap.add_argument("--seed", type=int, default=STANDARD["seed"])
    ap.add_argument("--hermes", default=hermes_matrix.OLDEST,
                    choices=[v.version for v in hermes_matrix.VERSIONS])
    a = ap.parse_args()
    t0 = time.monotonic()
    m = realistic_db(a.path, sessions=a.sessions, messages_per_session=STANDARD["messages_per_session"],
                     seed=a.seed, deleted=a.deleted, big=a.big, keep_wal=a.keep_wal, hermes=a.hermes)
    m.pop("sessions", None)
    m["deleted_message_ids"] = len(m.get("deleted_message_ids", []))
    m["wall_seconds_incl_cache"] = round(time.monotonic() - t0, 2)
    print(json.dumps(m, indent=1))
