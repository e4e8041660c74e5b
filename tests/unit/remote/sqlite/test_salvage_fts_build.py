"""The FTS build of `--fts rebuild` (issue 4's time target): each FTS table is filled by the
source's own triggers from the salvaged rows in a scratch database (several at once), and its
shadow tables are copied as they are into the output.

Proved here, on real Hermes 0.19.0 databases:
- the output's shadow tables equal, row for row, those of a reference where the same rows go
  through the same triggers in one database (so the copy adds, drops and alters nothing), for
  the healthy file and for damage cases with repaired and quarantined rows;
- the index holds exactly what Hermes' own triggers put in it, one message at a time (every
  term instance, the content and docsize tables, the averages);
- the FTS config rows are the source's, although the build ran with other FTS5 settings;
- serial and parallel builds give the same bytes, and the fallback path (triggers during the
  load, forced by the internal flag or chosen when the scratch build cannot be prepared)
  gives the same index; a scratch build that fails leaves that table for Hermes, whole;
- a build started from the image before the rows are final is kept only when they prove
  identical (then byte-identical to a build from the output), dropped when they differ, and
  redone from the output when it fails.
"""
import os
import sqlite3

import pytest

from fleetops.remote.sqlite import salvage as engine
from fleetops.remote.hermes.salvage_rules import RULES
from fleetops.remote.sqlite.salvage import fts as fts_stage
from fleetops.remote.sqlite.salvage import verify as verify_stage

FTS = ("messages_fts", "messages_fts_trigram")
SMALL = dict(sessions=6, messages_per_session=(10, 30), seed=5)


@pytest.fixture(scope="module")
def small_hermes(tmp_path_factory):
    """A small real Hermes db (every FTS row indexed by Hermes' triggers, one message a time)."""
    from tests.corpus import build
    try:
        build.venv_python()
    except build.HermesVenvMissing as exc:
        pytest.skip("needs the hermes venv: %s" % exc)
    p = tmp_path_factory.mktemp("fts-small") / "state.db"
    build.realistic_db(p, **SMALL)
    return str(p)


def _salvage(src, tmp_path, name="out.db", **kw):
    out = str(tmp_path / name)
    rep = engine.salvage(src, out, rules=RULES, **kw)
    return rep, out


def _ddl(con):
    return dict(con.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"))


def _shadows(con, fts):
    return sorted(r[0] for r in con.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE ? ESCAPE '\\'",
        (fts.replace("_", "\\_") + "\\_%",)) if r[0][len(fts) + 1:] in
        ("data", "idx", "content", "docsize", "config"))


def _rows(con, table, schema="main"):
    return con.execute('SELECT * FROM %s."%s" ORDER BY 1, 2' % (schema, table)).fetchall()


def _trigger_reference(out, ref, fts, config=engine.FTS5_BUILD_CONFIG):
    """`fts` filled by its triggers from `out`'s messages, in a fresh database: the FTS table
    and its triggers from out's DDL, then every message through one INSERT .. SELECT."""
    o = sqlite3.connect(out)
    ddl = _ddl(o)
    trigs = [n for n in ddl if n.startswith(fts + "_") and ddl[n].upper().startswith("CREATE TRIGGER")
             and n[len(fts) + 1:] in ("insert", "delete", "update")]
    o.close()
    assert len(trigs) == 3
    r = sqlite3.connect(ref, isolation_level=None)
    r.execute(ddl["messages"])
    r.execute(ddl[fts])
    for t in trigs:
        r.execute(ddl[t])
    for k, v in config:
        r.execute("INSERT INTO %s(%s, rank) VALUES (?, ?)" % (fts, fts), (k, v))
    r.execute("ATTACH ? AS o", (out,))
    r.execute("BEGIN")
    r.execute("INSERT INTO main.messages SELECT * FROM o.messages ORDER BY rowid")
    r.execute("COMMIT")
    return r


def assert_index_is_the_triggers(out, tmp_path):
    """Every shadow table of both FTS tables equals the trigger-built reference, row for row;
    the config rows are those of a table freshly created from the DDL."""
    o = sqlite3.connect(out)
    for fts in FTS:
        ref = _trigger_reference(out, str(tmp_path / ("ref-%s.db" % fts)), fts)
        shadows = _shadows(o, fts)
        assert shadows == _shadows(ref, fts) and len(shadows) == 5
        for s in shadows:
            if s.endswith("_config"):
                continue
            got, want = _rows(o, s), _rows(ref, s)
            assert got == want, (s, len(got), len(want))
        fresh = sqlite3.connect(":memory:")
        fresh.execute(_ddl(o)[fts])
        assert _rows(o, fts + "_config") == _rows(fresh, fts + "_config")
        ref.close()
    o.close()


def _vocab_diff(a, b, fts):
    """Rows of an fts5vocab 'instance' table (term, rowid, column, offset) in one index and
    not the other, both ways: 0, 0 when the two indexes hold exactly the same."""
    c = sqlite3.connect(":memory:")
    c.execute("ATTACH ? AS a", ("file:%s?mode=ro" % a,))
    c.execute("ATTACH ? AS b", ("file:%s?mode=ro" % b,))
    c.execute("CREATE VIRTUAL TABLE temp.va USING fts5vocab(a, %s, 'instance')" % fts)
    c.execute("CREATE VIRTUAL TABLE temp.vb USING fts5vocab(b, %s, 'instance')" % fts)
    n = c.execute("SELECT count(*) FROM temp.va").fetchone()[0]
    d1 = c.execute("SELECT count(*) FROM (SELECT * FROM temp.va EXCEPT SELECT * FROM temp.vb)").fetchone()[0]
    d2 = c.execute("SELECT count(*) FROM (SELECT * FROM temp.vb EXCEPT SELECT * FROM temp.va)").fetchone()[0]
    same = {}
    for s in ("content", "docsize", "config"):
        same[s] = _rows(c, "%s_%s" % (fts, s), "a") == _rows(c, "%s_%s" % (fts, s), "b")
    same["averages"] = (c.execute("SELECT block FROM a.%s_data WHERE id = 1" % fts).fetchone()
                        == c.execute("SELECT block FROM b.%s_data WHERE id = 1" % fts).fetchone())
    c.close()
    return n, d1, d2, same


def assert_same_index(a, b):
    for fts in FTS:
        n, d1, d2, same = _vocab_diff(a, b, fts)
        assert n > 0 and (d1, d2) == (0, 0), (fts, n, d1, d2)
        assert all(same.values()), (fts, same)


# ---------------------------------------------------------------- the scratch build

def test_scratch_build_equals_hermes_own_index(small_hermes, tmp_path):
    """On a healthy real Hermes db the rebuilt index holds exactly what Hermes' triggers put
    in it message by message, and the shadow tables are those of the trigger reference."""
    rep, out = _salvage(small_hermes, tmp_path)
    assert rep["verdict"] == "complete"
    for fts in FTS:
        f = rep["fts"][fts]
        assert f["created"] and f["build"] == "scratch"
        assert f["integrity_check"] == "ok" and f["match_ok"]
        assert f["build_config"] == dict(engine.FTS5_BUILD_CONFIG)
        assert f["config_preserved"] is True
    assert_index_is_the_triggers(out, tmp_path)
    assert_same_index(out, small_hermes)
    # the config rows are the source's, exactly
    s, o = sqlite3.connect(small_hermes), sqlite3.connect(out)
    for fts in FTS:
        assert _rows(o, fts + "_config") == _rows(s, fts + "_config") == [("version", 4)]
    assert not [n for n in rep["notes"] if "config" in n]
    # all six triggers, and nothing of the scratch databases left behind
    assert o.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' "
                     "AND name LIKE 'messages_fts%'").fetchone()[0] == 6
    assert not [n for n in o.execute("SELECT name FROM sqlite_master") if "fleetops" in n[0]]
    assert not [p.name for p in tmp_path.iterdir()
                if p.name.startswith("fleetops-salvage-") or "salvage-tmp" in p.name]


@pytest.mark.parametrize("case", ["healthy", "not_null_nulled", "interior_page_zeroed",
                                  "fts_pages_overwritten", "page_referenced_twice"])
def test_damaged_cases_index_is_the_triggers(salvaged, case, tmp_path):
    """Damage cases (repaired rows, rows only the page scan finds, a destroyed FTS index):
    the output index is the one the triggers give for the salvaged rows."""
    r = salvaged(case)
    assert r.rep["verdict"] in ("complete", "partial")
    assert all(f["build"] == "scratch" and f["integrity_check"] == "ok"
               for f in r.rep["fts"].values())
    assert_index_is_the_triggers(r.out, tmp_path)


def test_serial_and_parallel_builds_are_byte_identical(small_hermes, tmp_path):
    _, par = _salvage(small_hermes, tmp_path, "par.db", fts_workers=2)
    _, ser = _salvage(small_hermes, tmp_path, "ser.db", fts_workers=1)
    a, b = sqlite3.connect(par), sqlite3.connect(ser)
    for fts in FTS:
        for s in _shadows(a, fts):
            assert _rows(a, s) == _rows(b, s), s


def test_without_build_settings_same_index(small_hermes, tmp_path):
    """The FTS5 bulk settings change how the index is laid out, never what it holds."""
    rep, plain = _salvage(small_hermes, tmp_path, "plain.db", fts_build_config=())
    assert all("build_config" not in f for f in rep["fts"].values())
    _, tuned = _salvage(small_hermes, tmp_path, "tuned.db")
    assert_same_index(plain, tuned)


# ---------------------------------------------------------------- fallbacks

def test_forced_trigger_path_gives_the_same_index(small_hermes, tmp_path):
    """fts_build='triggers' (the path used when the scratch build is unavailable): FTS tables
    and triggers exist before the rows; same index, same config."""
    rep, legacy = _salvage(small_hermes, tmp_path, "legacy.db", fts_build="triggers")
    assert rep["verdict"] == "complete" and "fts_build" not in rep
    for f in rep["fts"].values():
        assert f["build"] == "triggers" and f["integrity_check"] == "ok" and f["match_ok"]
    _, scratch = _salvage(small_hermes, tmp_path, "scratch.db")
    assert_same_index(legacy, scratch)
    assert_same_index(legacy, small_hermes)


def test_unpreparable_scratch_falls_back_to_triggers(small_hermes, tmp_path, monkeypatch):
    monkeypatch.setattr(fts_stage, "fts_prepare", lambda s, name, trigs, **kw: (None, "forced off"))
    rep, out = _salvage(small_hermes, tmp_path)
    assert rep["verdict"] == "complete"
    for fts in FTS:
        f = rep["fts"][fts]
        assert f["build"] == "triggers" and f["scratch_unavailable"] == "forced off"
        assert f["created"] and f["integrity_check"] == "ok"
    assert any("scratch build unavailable (forced off)" in n for n in rep["notes"])
    assert_same_index(out, small_hermes)


def test_low_disk_space_falls_back_to_triggers(small_hermes, tmp_path, monkeypatch):
    real = os.statvfs

    class Tiny(object):
        def __init__(self, st):
            self.f_frsize = st.f_frsize
            self.f_bavail = 1

    monkeypatch.setattr(os, "statvfs", lambda p: Tiny(real(p)))
    rep, out = _salvage(small_hermes, tmp_path)
    assert all(f["build"] == "triggers" and "MB free" in f["scratch_unavailable"]
               for f in rep["fts"].values())
    assert rep["verdict"] == "complete"


def test_failed_scratch_build_leaves_that_table_to_hermes(small_hermes, tmp_path, monkeypatch):
    """A build that fails after the rows are in: that FTS table, its shadow tables and its
    triggers are all absent (Hermes would rebuild it), the other is built and verified, and
    the salvage fails, naming the table (fts=rebuild was asked)."""
    real = fts_stage.run_fts_job

    def flaky(self, job):
        if job.name == "messages_fts_trigram":
            raise sqlite3.OperationalError("disk I/O error (simulated)")
        return real(self, job)

    monkeypatch.setattr(fts_stage, "run_fts_job", flaky)
    rep, out = _salvage(small_hermes, tmp_path)
    tri = rep["fts"]["messages_fts_trigram"]
    assert tri["mode"] == "leave-to-hermes" and not tri["created"]
    assert "simulated" in tri["reason"]
    assert rep["fts"]["messages_fts"]["created"] and rep["fts"]["messages_fts"]["match_ok"]
    assert rep["verdict"] == "failed"        # never a fallback the report calls fine
    assert rep["verification"]["fts_not_rebuilt"] and "simulated" in rep["verdict_reasons"][1]
    o = sqlite3.connect(out)
    names = [r[0] for r in o.execute("SELECT name FROM sqlite_master")]
    assert not [n for n in names if n.startswith("messages_fts_trigram")]
    assert sum(1 for n in names if n in ("messages_fts_insert", "messages_fts_delete",
                                         "messages_fts_update")) == 3
    assert o.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


# ---------------------------------------------------------------- speculative builds

def _null_one_timestamp(path):
    """A message whose timestamp is NULL (repaired by salvage): its final row differs from
    the image's, so a build started from the image must not be used."""
    c = sqlite3.connect(path)
    c.execute("PRAGMA writable_schema=ON")
    c.execute("UPDATE sqlite_master SET sql = replace(sql, 'timestamp REAL NOT NULL', "
              "'timestamp REAL') WHERE name = 'messages'")
    c.commit()
    c.close()
    c = sqlite3.connect(path)
    mid = c.execute("SELECT max(id) FROM messages").fetchone()[0]
    c.execute("UPDATE messages SET timestamp = NULL WHERE id = ?", (mid,))
    c.commit()
    c.execute("PRAGMA writable_schema=ON")
    c.execute("UPDATE sqlite_master SET sql = replace(sql, 'timestamp REAL', "
              "'timestamp REAL NOT NULL') WHERE name = 'messages'")
    c.commit()
    c.close()
    return mid


def test_speculative_build_is_byte_identical(small_hermes, tmp_path):
    """Started from the image before the rows are final, kept because they prove identical:
    the same shadow tables as a build from the output."""
    rep, spec = _salvage(small_hermes, tmp_path, "spec.db", fts_workers=2)
    assert rep["fts_speculation"]["used"] is True and rep["fts_speculation"]["tables"]
    _, plain = _salvage(small_hermes, tmp_path, "plain.db", fts_workers=2, fts_speculate=False)
    a, b = sqlite3.connect(spec), sqlite3.connect(plain)
    for fts in FTS:
        for s in _shadows(a, fts):
            assert _rows(a, s) == _rows(b, s), s
    assert_index_is_the_triggers(spec, tmp_path)


def test_no_speculation_on_one_core(small_hermes, tmp_path):
    rep, out = _salvage(small_hermes, tmp_path, fts_workers=1)
    assert "fts_speculation" not in rep and rep["fts_build"]["workers"] == 1
    assert_index_is_the_triggers(out, tmp_path)


def test_speculation_dropped_when_final_rows_differ(small_hermes, tmp_path):
    src = str(tmp_path / "src.db")
    con = sqlite3.connect(small_hermes)
    con.execute("VACUUM INTO ?", (src,))
    con.close()
    mid = _null_one_timestamp(src)
    rep, out = _salvage(src, tmp_path, fts_workers=2)
    assert rep["tables"]["messages"]["repaired"] == 1
    assert rep["fts_speculation"] == {"used": False,
                                      "why": "final rows of messages differ from the image's"}
    assert all(f["build"] == "scratch" and f["integrity_check"] == "ok" for f in rep["fts"].values())
    assert_index_is_the_triggers(out, tmp_path)
    o = sqlite3.connect(out)
    ts = o.execute("SELECT timestamp FROM messages WHERE id = ?", (mid,)).fetchone()[0]
    assert ts is not None
    assert o.execute("SELECT rowid FROM messages_fts_trigram_content WHERE id = ?", (mid,)).fetchone()


def test_speculative_build_that_fails_is_rebuilt_from_the_output(small_hermes, tmp_path, monkeypatch):
    real = fts_stage.run_fts_job

    def flaky(self, job):
        if job.from_image:
            raise sqlite3.DatabaseError("database disk image is malformed (simulated)")
        return real(self, job)

    monkeypatch.setattr(fts_stage, "run_fts_job", flaky)
    rep, out = _salvage(small_hermes, tmp_path, fts_workers=2)
    assert rep["verdict"] == "complete"
    assert any("speculative build from the image failed" in n for n in rep["notes"])
    assert all(f["created"] and f["integrity_check"] == "ok" for f in rep["fts"].values())
    assert_index_is_the_triggers(out, tmp_path)


def test_output_and_report_renames_are_made_durable(small_hermes, tmp_path, monkeypatch):
    """The output and its report are fsynced before their rename, and their directory after it:
    a power cut must not leave the new name pointing at nothing (or at half a file)."""
    events = []
    real_rename = os.rename

    def rename(src, dst):
        events.append(("rename", os.path.basename(dst)))
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(verify_stage, "fsync_file", lambda p: events.append(("fsync_file", os.path.basename(p))))
    monkeypatch.setattr(verify_stage, "fsync_dir", lambda p: events.append(("fsync_dir", p)))
    report = str(tmp_path / "report.json")
    rep, out = _salvage(small_hermes, tmp_path, report_path=report)
    assert rep["verdict"] == "complete"
    i = events.index(("rename", "out.db"))
    assert events[i - 1][0] == "fsync_file" and events[i + 1] == ("fsync_dir", str(tmp_path))
    j = events.index(("rename", "report.json"))
    assert events[j + 1] == ("fsync_dir", str(tmp_path))
