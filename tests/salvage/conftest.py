"""Fixtures: each corpus damage case salvaged once per session, with source hashes taken
by the test itself before and after (independent of the report's own proof)."""
import hashlib
import os
from types import SimpleNamespace

import pytest

from fleetops.remote import salvage as engine


def sha_files(path):
    out = {}
    for s in ("", "-wal", "-shm"):
        p = str(path) + s
        if os.path.exists(p):
            with open(p, "rb") as fh:
                out[s or "db"] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="session")
def pristine(tmp_path_factory):
    from tests.corpus import build
    try:
        build.venv_python()
    except build.HermesVenvMissing as exc:
        pytest.skip("corpus needs the hermes venv: %s" % exc)
    p = tmp_path_factory.mktemp("salvage-pristine") / "state.db"
    build.realistic_db(p, **build.STANDARD)
    return p


@pytest.fixture(scope="session")
def salvaged(pristine, tmp_path_factory):
    """salvaged(case, **salvage_kwargs) -> namespace(d=Damage, rep|err, out, before, after)."""
    from tests.corpus import damage
    base = tmp_path_factory.mktemp("salvage-cases")
    cache = {}

    def run(name, **kw):
        key = (name, tuple(sorted(kw.items())))
        if key in cache:
            return cache[key]
        work = base / ("%s-%d" % (name, len(cache)))
        d = damage.make(name, pristine, work / "state.db")
        before = sha_files(d.path)
        out = work / "out" / "state.db"
        out.parent.mkdir(parents=True)
        rep = err = None
        try:
            rep = engine.salvage(d.path, str(out), schema_from=d.schema_from,
                                 report_path=str(out) + ".report.json", **kw)
        except engine.SalvageInputError as e:
            err = e
        r = SimpleNamespace(d=d, rep=rep, err=err, out=str(out), before=before,
                            after=sha_files(d.path),
                            out_sidecars=[s for s in ("-wal", "-shm", "-journal")
                                          if os.path.exists(str(out) + s)])
        cache[key] = r
        return r

    return run
