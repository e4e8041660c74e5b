"""Fixtures: each corpus damage case salvaged once per session, with source hashes taken
by the test itself before and after (independent of the report's own proof)."""
import hashlib
import os
from types import SimpleNamespace

import pytest

from fleetops.remote.sqlite import salvage as engine
from fleetops.remote.hermes.salvage_rules import RULES


def sha_files(path):
    out = {}
    for s in ("", "-wal", "-shm"):
        p = str(path) + s
        if os.path.exists(p):
            with open(p, "rb") as fh:
                out[s or "db"] = hashlib.sha256(fh.read()).hexdigest()
    return out


@pytest.fixture(scope="session")
def pristine_of(tmp_path_factory):
    """pristine_of(version) -> a healthy STANDARD store written by that Hermes version's own
    SessionDB (skips, with the install command, when its venv is absent)."""
    from tests.corpus import build
    made = {}

    def make(version):
        if version not in made:
            try:
                build.venv_python(version)
            except build.HermesVenvMissing as exc:
                pytest.skip("corpus needs the Hermes %s venv: %s" % (version, exc))
            p = tmp_path_factory.mktemp("salvage-pristine-%s" % version) / "state.db"
            build.realistic_db(p, **build.STANDARD, hermes=version)
            made[version] = p
        return made[version]

    return make


@pytest.fixture(scope="session")
def pristine(pristine_of):
    from tests.support import hermes_matrix
    return pristine_of(hermes_matrix.OLDEST)


@pytest.fixture(scope="session")
def salvaged_of(pristine_of, tmp_path_factory):
    """salvaged_of(version)(case, **salvage_kwargs) -> namespace(d=Damage, rep|err, out,
    before, after, src): each case damaged from that version's store, salvaged once."""
    from tests.corpus import damage
    base = tmp_path_factory.mktemp("salvage-cases")
    cache = {}

    def for_version(version):
        def run(name, **kw):
            key = (version, name, tuple(sorted(kw.items())))
            if key in cache:
                return cache[key]
            work = base / ("%s-%s-%d" % (version, name, len(cache)))
            d = damage.make(name, pristine_of(version), work / "state.db")
            before = sha_files(d.path)
            out = work / "out" / "state.db"
            out.parent.mkdir(parents=True)
            rep = err = None
            try:
                rep = engine.salvage(d.path, str(out), schema_from=d.schema_from, rules=RULES,
                                     report_path=str(out) + ".report.json", **kw)
            except engine.SalvageInputError as e:
                err = e
            r = SimpleNamespace(d=d, rep=rep, err=err, out=str(out), before=before,
                                after=sha_files(d.path), src=pristine_of(version),
                                out_sidecars=[s for s in ("-wal", "-shm", "-journal")
                                              if os.path.exists(str(out) + s)])
            cache[key] = r
            return r
        return run

    return for_version


@pytest.fixture(scope="session")
def salvaged(salvaged_of):
    """salvaged(case, **salvage_kwargs) for the oldest version of the matrix."""
    from tests.support import hermes_matrix
    return salvaged_of(hermes_matrix.OLDEST)
