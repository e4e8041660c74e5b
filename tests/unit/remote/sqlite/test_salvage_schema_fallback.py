"""A lost schema page never aborts the salvage: the DDL of the lost objects comes from the
schema the store's Hermes version creates (shipped, generated from the real package), per
object; a failure inside the salvage is the salvage's (exit 2), never a results-store error,
and leaves no temporary output."""
import os
import sqlite3

import pytest

from fleetops.hermes import salvage_cli
from fleetops.remote.hermes import schema_22 as hermes_schema_22
from fleetops.remote.hermes import schemas as hermes_schemas
from fleetops.remote.sqlite import salvage as engine
from fleetops.remote.hermes.salvage_rules import RULES
from fleetops.remote.sqlite.salvage import verify
from tests.corpus import damage, ship_schema


def test_lost_ddl_taken_from_the_shipped_schema(salvaged):
    r = salvaged("schema_page_lost")
    fb = r.rep["schema_fallback"]
    assert fb["used"] and fb["hermes_version"] == "0.19.0" and fb["schema_version"] == 22
    assert set(fb["objects"]) == set(r.d.extra["lost_objects"])
    assert {"sessions", "messages"} <= set(fb["objects"])
    assert r.rep["verdict"] == "complete" and r.rep["loss_rows"] == 0
    assert not os.path.exists(r.out + ".salvage-tmp")
    c = sqlite3.connect(r.out)
    got = dict(c.execute("SELECT name, sql FROM sqlite_schema WHERE name IN ('sessions', 'messages')"))
    c.close()
    ddl = dict((o[1], o[3]) for o in hermes_schema_22.OBJECTS)
    assert got == {"sessions": ddl["sessions"], "messages": ddl["messages"]}


def test_shipped_schema_is_what_the_real_sessiondb_creates(pristine):
    meta = ship_schema.generated()
    assert meta["hermes_version"] == hermes_schema_22.HERMES_VERSION
    assert meta["schema_version"] == hermes_schema_22.SCHEMA_VERSION
    assert [tuple(o) for o in meta["objects"]] == hermes_schema_22.OBJECTS
    # and a store grown by the real package has exactly that schema
    c = sqlite3.connect("file:%s?mode=ro" % pristine, uri=True)
    rows = c.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY rowid").fetchall()
    c.close()
    assert rows == hermes_schema_22.OBJECTS


def test_identify_by_ddl_refuses_what_it_does_not_know():
    rows = [{"name": "sessions", "sql": "CREATE TABLE sessions (id TEXT PRIMARY KEY, x)"}]
    mod, why = hermes_schemas.identify(rows)
    assert mod is None and "matches no schema" in why
    mod, why = hermes_schemas.identify([], schema_version=26)
    assert mod is None and "not one fleetops ships" in why
    ok = [{"name": o[1], "sql": o[3]} for o in hermes_schema_22.OBJECTS[:3]]
    assert hermes_schemas.identify(ok)[0] is hermes_schema_22


def test_without_a_known_schema_the_rest_is_still_salvaged(pristine, tmp_path, monkeypatch, capsys):
    """No shipped version fits: the objects with surviving DDL are salvaged, the run says what
    it could not do, exits 2, and leaves no temporary output."""
    monkeypatch.setattr(hermes_schemas, "KNOWN", ())
    d = damage.make("schema_page_lost", pristine, tmp_path / "c" / "state.db")
    out = tmp_path / "out" / "state.db"
    out.parent.mkdir()
    rc = salvage_cli.salvage({"source": d.path, "output": str(out), "fts": "leave-to-hermes"})
    err = capsys.readouterr()
    assert rc == 2
    assert "results store" not in err.err + err.out
    assert not os.path.exists(str(out) + ".salvage-tmp")
    assert os.path.exists(out)
    c = sqlite3.connect(out)
    names = {r[0] for r in c.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    c.close()
    assert "messages" not in names and "state_meta" in names


def test_failure_inside_salvage_is_reported_as_such(pristine, tmp_path, monkeypatch, capsys):
    def boom(self):
        raise sqlite3.OperationalError("disk I/O error")
    monkeypatch.setattr(verify, "verify_and_finish", boom)
    d = damage.make("healthy", pristine, tmp_path / "c" / "state.db")
    out = tmp_path / "out" / "state.db"
    out.parent.mkdir()
    with pytest.raises(engine.SalvageError):
        engine.salvage(d.path, str(out), fts="leave-to-hermes", rules=RULES)
    assert sorted(os.listdir(out.parent)) == []
    rc = salvage_cli.salvage({"source": d.path, "output": str(out), "fts": "leave-to-hermes"})
    err = capsys.readouterr().err
    assert rc == 2 and "salvage failed: OperationalError: disk I/O error" in err
    assert "results store" not in err
    assert sorted(os.listdir(out.parent)) == []
