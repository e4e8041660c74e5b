"""FTS text against its source, on any SQLite: the copy of each message's text an FTS5 table keeps
(its *_content) checked against the text its insert trigger would write from the base table.

A flipped bit in message text, or in the FTS table's own copy of it, breaks no b-tree and no
checksum: quick_check and integrity_check pass, FTS5's own check (3.44+) sees only the second.
The insert trigger (INSERT INTO fts(rowid, cols) VALUES (new.id, expressions)) says what each
FTS row must hold; its expressions over a table scan of the base table and the FTS table's
*_content read by a table scan are fingerprinted the same way as an index against its table
(audit_honesty), and merged only on a mismatch, to name the rows. Which of the two copies is the
damaged one the text alone cannot say, so the finding names both.
"""
from __future__ import annotations

import re
import sqlite3
from typing import Any, Dict, List, Optional, Tuple

from fleetops.remote.hermes import audit_fts
from fleetops.remote.hermes import audit_honesty
from fleetops.remote.hermes.audit_schema import Objs
from fleetops.remote.sqlite.sql import split_top

_INSERT = re.compile(r"INSERT\s+INTO\s+[\"'`\[]?(\w+)[\"'`\]]?\s*\(([^)]*)\)\s*VALUES\s*\((.*)\)\s*;\s*END\s*$",
                     re.I | re.S)


def source_of(objs: Objs, name: str) -> Optional[Tuple[str, List[str]]]:
    """(base table, [SQL expressions over it: rowid first, then each FTS column]) from the AFTER
    INSERT trigger that fills `name`, or None when no trigger fills it from one table (an
    external-content FTS, or one written by the application itself)."""
    for o in objs.values():
        if o["type"] != "trigger" or not re.search(r"\bAFTER\s+INSERT\s+ON\b", o["sql"], re.I):
            continue
        m = _INSERT.search(o["sql"])
        if not m or m.group(1) != name:
            continue
        cols = [c.strip().strip('"').lower() for c in m.group(2).split(",")]
        values = [re.sub(r"\bnew\.", "", v.strip(), flags=re.I) for v in split_top(m.group(3))]
        if len(cols) != len(values) or cols[0] != "rowid" or objs.get(o["tbl_name"], {}).get("type") != "table":
            return None
        return o["tbl_name"], values
    return None


def fts_source(conn: sqlite3.Connection, objs: Objs, name: str,
               cache: Optional[Dict[str, Tuple[int, int]]] = None) -> Optional[Dict[str, Any]]:
    """{"rows", "source_rows", "ok", "differs", "rows_named"} for one FTS table, or None when it
    has no *_content or no trigger that says what it holds. `cache` ({SQL: fingerprint}, shared by
    units that run one after another on connections of one snapshot) lets two FTS tables fed from
    the same expressions (Hermes' word and trigram tables) scan the base table once."""
    cache = {} if cache is None else cache
    src = source_of(objs, name)
    if src is None or (name + "_content") not in objs:
        return None
    table, values = src
    ncols = len(values) - 1
    fts_side = "SELECT id, %s FROM %s NOT INDEXED" % (", ".join("c%d" % i for i in range(ncols)),
                                                       audit_fts.qi(name + "_content"))
    table_side = "SELECT %s FROM %s NOT INDEXED" % (", ".join(values), audit_fts.qi(table))
    try:
        have = audit_honesty.fingerprint(conn, fts_side)
        want = cache.get(table_side) or audit_honesty.fingerprint(conn, table_side)
        cache[table_side] = want
    except sqlite3.Error as exc:    # a table that cannot be scanned is the table checks' finding
        return {"table": table, "ok": None, "error": audit_fts.failure(exc)}
    out: Dict[str, Any] = {"table": table, "rows": have[0], "source_rows": want[0], "ok": have == want, "differs": 0}
    if not out["ok"]:
        lacks, excess = audit_honesty.merge(conn, table_side, fts_side)
        ids = sorted(set(r[0] for r in lacks) | set(r[0] for r in excess), key=repr)
        out.update(differs=len(ids), rows_named=ids[:audit_honesty.SHOWN])
    return out


def reason(name: str, r: Dict[str, Any]) -> str:
    """The finding, naming both copies of the text."""
    shown = ", ".join(str(i) for i in r.get("rows_named") or [])
    return ("%s: its copy of the text differs from %s's on %d rows (rowids %s%s): one of the two copies is "
            "damaged" % (name, r["table"], r["differs"], shown, ", ..." if r["differs"] > len(r["rows_named"]) else ""))
