"""The FTS tables' settings (their _config rows) and the check of a built FTS table: used
while the tables are built (fts, ftsbuild) and when the output is verified (verify).
"""
import re
import sqlite3

from fleetops.remote.sqlite.fileformat.record import text_or_invalid
from fleetops.remote.sqlite.salvage.sqlutil import one_row, schema_names
from fleetops.remote.sqlite.sql import quote_ident


def fts_config_rows(con, table):
    return [list(r) for r in con.execute("SELECT k, v FROM main.%s ORDER BY k" % quote_ident(table))]


def put_fts_config(con, name, src_rows, ddl_rows, schema="main"):
    """Write the source's FTS settings (rows of its _config) into the new table's _config, with
    `version` as this SQLite's CREATE wrote it; returns the rows written."""
    want = dict((k, v) for k, v in src_rows if k != "version")
    want.update((k, v) for k, v in ddl_rows if k == "version")
    cfg = "%s.%s" % (schema, quote_ident(name + "_config"))
    con.execute("DELETE FROM %s" % cfg)
    for k, v in sorted(want.items()):
        con.execute("INSERT INTO %s(k, v) VALUES (?, ?)" % cfg, (k, v))
    return [[k, want[k]] for k in sorted(want)]


def fts_check(s, name, out):
    rep = s.fts.report[name]
    out.text_factory = text_or_invalid
    try:
        out.execute("INSERT INTO %s(%s) VALUES('integrity-check')" % (quote_ident(name), quote_ident(name)))
        rep["integrity_check"] = "ok"
    except sqlite3.Error as e:
        rep["integrity_check"] = str(e)
    try:
        rep["rows"] = one_row(out, "SELECT count(*) FROM %s" % quote_ident(name))[0]
        probe = None
        for row in out.execute("SELECT rowid, * FROM %s LIMIT 200" % quote_ident(name)).fetchall():
            words = [w for text in row[1:] if isinstance(text, str)
                     for w in re.findall(r"[A-Za-z0-9]{4,}", text)]
            if words:
                probe = (row[0], words[0])
                break
        if probe is None:
            rep["match_probe"] = "no text to probe" if rep["rows"] == 0 else "no probe word"
            rep["match_ok"] = rep["rows"] == 0
        else:
            hits = [r[0] for r in out.execute(
                "SELECT rowid FROM %s WHERE %s MATCH ?" % (quote_ident(name), quote_ident(name)),
                ('"%s"' % probe[1],))]
            rep["match_probe"] = {"word": probe[1], "rowid": probe[0], "hits": len(hits)}
            rep["match_ok"] = probe[0] in hits
    except sqlite3.Error as e:
        rep["match_probe"] = str(e)
        rep["match_ok"] = False
    return rep["integrity_check"] == "ok" and rep["match_ok"]


def keep_fts_config(s, out, name, ddl_rows):
    """Give the new FTS table the source's settings (its _config rows: usermerge, rank,
    pgsz, ...), written as rows like the other shadow tables; `version` stays the one this
    SQLite's CREATE wrote, as the index is in its format. Returns the rows it now has (the
    DDL's when the source's cannot be read, noted)."""
    if ddl_rows is None:
        return None
    src_rows = None
    if s.schema.src is not None:
        try:
            src_rows = fts_config_rows(s.schema.src, name + "_config")
        except sqlite3.Error as e:
            s.notes.append("FTS table %s: the source's settings are unreadable (%s); "
                           "the rebuilt table has its DDL's" % (name, e))
    if src_rows is None:
        return ddl_rows
    return put_fts_config(out, name, src_rows, ddl_rows)


def fts_config_check(s, name):
    """The output's FTS config rows are exactly those its CREATE VIRTUAL TABLE wrote
    (a scratch build's bulk settings never reach it); a source whose rows differ is
    noted, as the rebuilt table starts from the DDL."""
    rep = s.fts.report[name]
    cfg = name + "_config"
    if cfg not in schema_names(s.dest.out, "table"):
        return True
    got = fts_config_rows(s.dest.out, cfg)
    rep["config"] = got
    ok = True
    if name in s.fts.config_expected:
        ok = got == s.fts.config_expected[name]
        rep["config_preserved"] = ok
    if s.schema.src is not None:
        try:
            src_rows = fts_config_rows(s.schema.src, cfg)
        except sqlite3.Error:
            src_rows = None
        if src_rows is not None and src_rows != got:
            s.notes.append("FTS table %s: the source's config rows %r differ from the "
                           "rebuilt table's %r (rebuilt from the DDL)"
                           % (name, src_rows, got))
    return ok
