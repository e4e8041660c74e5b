"""The store's schema objects as the audit judges them: which are FTS tables, their shadow
tables and indexes (damage there is rebuildable), and which are the base tables whose rows count."""
from __future__ import annotations

import re
import sqlite3
from typing import Any, Dict, List, Tuple

FTS_SHADOW_SUFFIXES = ("_data", "_idx", "_content", "_docsize", "_config",            # fts5
                       "_segments", "_segdir", "_stat")                               # fts3/4
# one sqlite_master row with its role ({type, name, tbl_name, rootpage, sql, role, fts}), by name
Obj = Dict[str, Any]
Objs = Dict[str, Obj]
# each FTS table's settings ({module, tokenizer, detail, content, columnsize}), by name
FtsSpecs = Dict[str, Dict[str, Any]]


def read_schema(conn: sqlite3.Connection) -> Tuple[Objs, FtsSpecs]:
    """Objects of sqlite_master with FTS roles worked out: {name: {type, tbl_name, rootpage, sql, role, fts}}."""
    rows = conn.execute("SELECT type, name, tbl_name, rootpage, sql FROM sqlite_master").fetchall()
    objs: Objs = {}
    fts: FtsSpecs = {}
    for typ, name, tbl, root, sql in rows:
        objs[name] = {"type": typ, "name": name, "tbl_name": tbl, "rootpage": root, "sql": sql or "",
                      "role": typ, "fts": None}
        m = re.match(r"\s*CREATE\s+VIRTUAL\s+TABLE\s+.*?\bUSING\s+(fts[345])\s*\((.*)\)\s*$", sql or "",
                     re.I | re.S)
        if typ == "table" and m:
            args = m.group(2)
            tok = re.search(r"tokenize\s*=\s*['\"]?\s*([A-Za-z0-9_]+)", args, re.I)
            det = re.search(r"detail\s*=\s*['\"]?([A-Za-z]+)", args, re.I)
            con = re.search(r"content\s*=\s*(['\"])(.*?)\1", args, re.I)
            csz = re.search(r"columnsize\s*=\s*['\"]?([01])", args, re.I)
            fts[name] = {"module": m.group(1).lower(), "tokenizer": tok.group(1).lower() if tok else "unicode61",
                         "detail": det.group(1).lower() if det else "full",
                         "content": con.group(2) if con else None,
                         "columnsize": csz.group(1) != "0" if csz else True}
            objs[name]["role"] = "fts"
            objs[name]["fts"] = name
    for name, o in objs.items():
        if o["role"] == "fts":
            continue
        for vt in fts:
            if o["type"] == "table" and name.startswith(vt + "_") and name[len(vt):] in FTS_SHADOW_SUFFIXES:
                o["role"] = "fts_shadow"
                o["fts"] = vt
    for o in objs.values():  # indexes (autoindexes) of shadow tables are FTS too
        if o["type"] == "index":
            owner = objs.get(o["tbl_name"])
            if owner is not None and owner["fts"]:
                o["role"] = "fts_shadow_index"
                o["fts"] = owner["fts"]
    return objs, fts


def base_tables(objs: Objs) -> List[Obj]:
    return [o for o in objs.values() if o["type"] == "table" and o["role"] == "table"
            and o["rootpage"] and not o["name"].startswith("sqlite_stat")]
