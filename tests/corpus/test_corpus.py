"""The corpus checks itself: each damage case really is what its Damage record claims.

Verified with stdlib sqlite3 and, where Python's sqlite3 hides the answer, the SQLite C API
through ctypes: on SQLite 3.40 a quick_check over a damaged table returns its report in the
first row and then fails the next step with SQLITE_CORRUPT; Python's cursor drops that row,
so the report is read with sqlite3_step directly.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from . import build, damage, pagefile, truth

REQUIRED = {"fts_pages_overwritten", "session_duplicated_behind_title_index", "unique_index_emptied",
            "not_null_nulled", "interior_page_zeroed", "page1_damaged", "schema_page_damaged",
            "zero_length", "not_sqlite", "missing", "garbage_huge_rowid", "garbage_leaf_pages",
            "page_referenced_twice", "torn_wal", "deleted_on_freelist", "healthy",
            "freelist_trunk_pointer_damaged", "freelist_trunk_page_damaged", "truncated_copy",
            "header_zeroed", "interior_points_at_foreign_leaf", "schema_page_lost",
            "invalid_utf8_in_rows", "header_magic_damaged", "header_page_size_damaged",
            "header_freelist_damaged", "header_zeroed_alone", "overflow_chains_damaged",
            "wal_stale_frames", "fts_doclist_bit_flipped", "sessions_leaf_lost_write",
            "interior_child_pointer_bit_flipped"}


# ---------------------------------------------------------------- oracles

def _capi():
    name = ctypes.util.find_library("sqlite3")
    if not name:
        pytest.skip("libsqlite3 not found for ctypes")
    lib = ctypes.CDLL(name)
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.sqlite3_open_v2.argtypes = [cp, ctypes.POINTER(vp), ctypes.c_int, cp]
    lib.sqlite3_prepare_v2.argtypes = [vp, cp, ctypes.c_int, ctypes.POINTER(vp), vp]
    lib.sqlite3_step.argtypes = [vp]
    lib.sqlite3_column_text.argtypes = [vp, ctypes.c_int]
    lib.sqlite3_column_text.restype = cp
    lib.sqlite3_finalize.argtypes = [vp]
    lib.sqlite3_close.argtypes = [vp]
    lib.sqlite3_errmsg.argtypes = [vp]
    lib.sqlite3_errmsg.restype = cp
    return lib


def pragma_lines(path, sql):
    """(report lines, error or None) of an integrity pragma, keeping rows returned before an error."""
    lib = _capi()
    db, st = ctypes.c_void_p(), ctypes.c_void_p()
    lines, err = [], None
    lib.sqlite3_open_v2(f"file:{path}?mode=ro".encode(), ctypes.byref(db), 0x01 | 0x40, None)
    try:
        if lib.sqlite3_prepare_v2(db, sql.encode(), -1, ctypes.byref(st), None):
            return [], lib.sqlite3_errmsg(db).decode()
        while True:
            rc = lib.sqlite3_step(st)
            if rc == 100:
                lines += [l for l in (lib.sqlite3_column_text(st, 0) or b"").decode().split("\n")
                          if l and not l.startswith("*** in database")]
                continue
            if rc != 101:
                err = lib.sqlite3_errmsg(db).decode()
            break
    finally:
        lib.sqlite3_finalize(st)
        lib.sqlite3_close(db)
    return lines, err


def attribute(line: str, owners: dict, roots: dict) -> str:
    """Name the object an integrity-check line is about (index name, table name, or page owner)."""
    m = re.search(r"(?:missing from|entries in) index (\S+)", line)
    if m:
        return m.group(1)
    m = re.search(r"NULL value in (\w+)\.", line)
    if m:
        return m.group(1)
    m = re.search(r"Tree (\d+)", line)
    if m:
        return roots.get(int(m.group(1)), "?")
    m = re.search(r"[Pp]age (\d+)", line)
    if m:
        return owners.get(int(m.group(1)), "?")
    return "?"


def errors_by_object(path, src, pragma="quick_check"):
    lines, err = pragma_lines(path, f"PRAGMA {pragma}(1000000)")
    owners = pagefile.page_owners(src)
    roots = {v: k for k, v in pagefile.root_pages(src).items()}
    if lines == ["ok"]:
        return Counter(), err
    return Counter(attribute(l, owners, roots) for l in lines), err


def ro(path):
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def one(con, sql, *args):
    return con.execute(sql, args).fetchone()[0]


def sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def base_truth(path):
    return truth.ground_truth(path)["tables"]


# ---------------------------------------------------------------- build, parser, truth

def test_standard_build_is_realistic(standard_meta, pristine_db):
    assert standard_meta["hermes_version"] == "0.19.0"
    con = ro(pristine_db)
    n_sessions = build.STANDARD["sessions"] - build.STANDARD["deleted"]
    assert one(con, "SELECT count(*) FROM sessions NOT INDEXED") == n_sessions
    assert one(con, "SELECT count(*) FROM messages NOT INDEXED") > 3000
    assert one(con, "SELECT count(*) FROM messages WHERE length(content) > 4096") > 10
    assert one(con, "SELECT count(*) FROM messages WHERE tool_name IS NOT NULL") > 100
    assert one(con, "SELECT count(*) FROM messages WHERE tool_calls IS NOT NULL") > 50
    assert one(con, "SELECT count(*) FROM messages WHERE content GLOB '*```*'") > 50
    assert one(con, "SELECT count(*) FROM messages WHERE content <> CAST(CAST(content AS BLOB) AS TEXT) "
                    "OR length(CAST(content AS BLOB)) > length(content)") > 10  # non-ASCII text
    assert one(con, "SELECT count(*) FROM sessions WHERE title IS NULL") > 0
    assert one(con, "SELECT count(DISTINCT title) FROM sessions WHERE title IS NOT NULL") == \
        one(con, "SELECT count(*) FROM sessions WHERE title IS NOT NULL")
    assert one(con, "SELECT count(*) FROM session_model_usage") > 0
    assert one(con, "SELECT count(*) FROM sessions WHERE ended_at IS NOT NULL") > 0
    assert one(con, "PRAGMA journal_mode") == "wal"
    assert one(con, "PRAGMA freelist_count") > 0
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()
    wal = Path(str(pristine_db) + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "build must be checkpointed into one file"
    roots = pagefile.root_pages(pristine_db)
    with pagefile.PageFile(pristine_db) as pf:
        interior, _ = pf.walk(roots["messages"])
        assert len(interior) >= 2, "messages needs a non-root interior page for interior_page_zeroed"
        cells = [c for pg in pf.walk(roots["messages"])[1] for c in pf.cells(pf.parse_page(pg))]
        assert any(c.overflow for c in cells), "some messages must spill to overflow pages"


def test_deleted_rows_absent_from_table_scan(standard_meta, pristine_db):
    con = ro(pristine_db)
    ids = standard_meta["deleted_message_ids"]
    assert ids and standard_meta["deleted_sessions"]
    marks = ",".join("?" * len(ids))
    assert one(con, f"SELECT count(*) FROM messages NOT INDEXED WHERE id IN ({marks})", *ids) == 0
    for sid in standard_meta["deleted_sessions"]:
        assert one(con, "SELECT count(*) FROM sessions NOT INDEXED WHERE id = ?", sid) == 0


def test_build_is_deterministic_and_cache_hands_out_copies(hermes_venv, tmp_path, monkeypatch):
    params = dict(sessions=3, messages_per_session=(4, 8), seed=99, deleted=1)
    digests = []
    for k in range(2):
        monkeypatch.setattr(build, "CACHE", tmp_path / f"cache{k}")
        out = tmp_path / f"out{k}" / "state.db"
        meta = build.realistic_db(out, **params)
        digests.append(sha(out))
        cached = build.CACHE / build._key({**params, "messages_per_session": [4, 8],
                                            "titles": True, "tool_calls": True}) / "state.db"
        assert cached.exists() and cached != out
        out.write_bytes(b"x")  # damaging the copy must not touch the cache
        assert cached.stat().st_size == meta["size_bytes"]["db"]
    assert digests[0] == digests[1]


def test_varint_roundtrip():
    for v in (0, 1, 127, 128, 240, 2287, 16383, 16384, 2 ** 21, 2 ** 40 + 5, 2 ** 56 - 1, 2 ** 56,
              2 ** 63 - 1, -1, -(2 ** 63)):
        enc = pagefile.encode_varint(v)
        assert pagefile.read_varint(enc + b"\x00", 0) == (v, len(enc))
    assert pagefile.encode_varint(127) == b"\x7f" and pagefile.encode_varint(128) == b"\x81\x00"


def test_page_parser_agrees_with_sqlite(pristine_db):
    gt = base_truth(pristine_db)
    roots = pagefile.root_pages(pristine_db)
    with pagefile.PageFile(pristine_db) as pf:
        for table in ("messages", "sessions", "session_model_usage"):
            rows = {}
            for _pg, rowid, vals in pf.table_rows(roots[table]):
                if table == "messages" and vals[0] is None:  # INTEGER PRIMARY KEY alias is stored as NULL
                    vals[0] = rowid
                rows[rowid] = tuple(vals)
            assert rows == gt[table]["rows"], table
        trunks, leaves = pf.freelist()
        assert len(trunks) + len(leaves) == pf.freelist_count


def test_rows_on_pages_cover_each_row_once(pristine_db):
    gt = base_truth(pristine_db)
    for table in ("messages", "sessions"):
        pages = truth.rows_on_pages(pristine_db, table)
        ids = [r for v in pages.values() for r in v]
        assert len(ids) == len(set(ids)) and set(ids) == set(gt[table]["rows"])


def test_all_cases_present_and_documented():
    assert set(damage.ALL_CASES) == REQUIRED
    for name, fn in damage.ALL_CASES.items():
        assert fn.__doc__ and len(fn.__doc__) > 40, name


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_case_record_is_consistent(name, damaged, pristine_db, standard_meta):
    d = damaged(name)
    assert d.name == name and d.expect_verdict in damage.VERDICTS
    if d.expect_verdict in ("unreadable", "missing") and name in ("zero_length", "not_sqlite", "missing"):
        assert d.expected_rows == {}
        return
    gt = base_truth(d.truth_path)
    for table, ids in d.expected_rows.items():
        extra = {d.rewritten_rowid[2]} if d.rewritten_rowid and d.rewritten_rowid[0] == table else set()
        assert ids <= set(gt[table]["rows"]) | extra, table
        assert not ids & d.lost_rows.get(table, set()), table
    deleted = set(standard_meta["deleted_message_ids"])
    assert not d.expected_rows["messages"] & deleted, "a deleted message must never be expected back"


# ---------------------------------------------------------------- the cases, one by one

def test_healthy(damaged, pristine_db):
    d = damaged("healthy")
    assert sha(d.path) == sha(pristine_db)
    con = ro(d.path)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert d.expected_rows == truth.rowids(truth.ground_truth(pristine_db))


def test_fts_pages_overwritten(damaged, pristine_db):
    d = damaged("fts_pages_overwritten")
    errs, _ = errors_by_object(d.path, pristine_db)
    assert set(errs) == d.expect_errors_in == {"messages_fts_trigram_data", "messages_fts_data"}
    assert errs["messages_fts_trigram_data"] >= 5
    con = ro(d.path)
    for t in ("messages", "sessions"):
        assert con.execute(f'PRAGMA quick_check("{t}")').fetchall() == [("ok",)]
    assert base_truth(d.path) == base_truth(pristine_db)
    assert not d.lost_rows and d.expected_rows == truth.rowids(truth.ground_truth(pristine_db))


def test_fts_doclist_bit_flipped(damaged, pristine_db):
    """One bit differs from the pristine file, inside the block the case names; every b-tree holds."""
    d = damaged("fts_doclist_bit_flipped")
    a, b = open(pristine_db, "rb").read(), open(d.path, "rb").read()
    pages = [o for o in range(0, len(a), 4096) if a[o:o + 4096] != b[o:o + 4096]]
    diff = [o + i for o in pages for i in range(4096) if a[o + i] != b[o + i]]
    assert len(a) == len(b) and len(diff) == 1 and bin(a[diff[0]] ^ b[diff[0]]).count("1") == 1
    con = ro(d.path)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)] or sqlite3.sqlite_version_info >= (3, 44)
    pristine = ro(pristine_db)
    q = "SELECT block FROM messages_fts_trigram_data WHERE id = ?"
    assert one(con, q, d.extra["fts_block"]) != one(pristine, q, d.extra["fts_block"])
    assert base_truth(d.path) == base_truth(pristine_db)
    assert not d.lost_rows and d.expected_rows == truth.rowids(truth.ground_truth(pristine_db))


def test_session_duplicated_behind_title_index(damaged, pristine_db):
    d = damaged("session_duplicated_behind_title_index")
    (rowid,) = d.duplicated["sessions"]
    n = base_truth(pristine_db)["sessions"]["count"]
    con = ro(d.path)
    assert one(con, "SELECT count(*) FROM sessions") == n
    assert one(con, "SELECT count(*) FROM sessions NOT INDEXED") == n + 1
    assert one(con, "SELECT count(DISTINCT id) FROM sessions NOT INDEXED") == n
    assert [r[0] for r in con.execute("SELECT rowid FROM sessions NOT INDEXED")].count(rowid) == 2
    # the field report's trap: the duplicate-title query answered from the unique index finds nothing
    dup_q = "SELECT count(*) FROM (SELECT title FROM sessions {} WHERE title IS NOT NULL GROUP BY title HAVING count(*) > 1)"
    assert one(con, dup_q.format("INDEXED BY idx_sessions_title_unique")) == 0
    assert one(con, dup_q.format("NOT INDEXED")) == 1
    errs, _ = errors_by_object(d.path, pristine_db)
    assert set(errs) == d.expect_errors_in == {"sessions"}
    deep, _ = errors_by_object(d.path, pristine_db, "integrity_check")
    assert set(deep) == d.deep_errors_in and "idx_sessions_title_unique" in deep


def test_unique_index_emptied(damaged, pristine_db):
    d = damaged("unique_index_emptied")
    con = ro(d.path)
    assert con.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    deep, _ = errors_by_object(d.path, pristine_db, "integrity_check")
    assert set(deep) == d.deep_errors_in == {"idx_sessions_title_unique"}
    assert one(con, "SELECT count(*) FROM sessions INDEXED BY idx_sessions_title_unique WHERE title IS NOT NULL") == 0
    assert one(con, "SELECT count(*) FROM sessions NOT INDEXED WHERE title IS NOT NULL") > 0
    assert base_truth(d.path) == base_truth(pristine_db)


def test_not_null_nulled(damaged, pristine_db):
    d = damaged("not_null_nulled")
    ((table, rowid, col, original),) = d.nulled
    gt = base_truth(pristine_db)
    cols = gt[table]["columns"]
    assert gt[table]["rows"][rowid][cols.index(col)] == original
    after = base_truth(d.path)
    row = list(after[table]["rows"][rowid])
    assert row[cols.index(col)] is None
    row[cols.index(col)] = original
    assert tuple(row) == gt[table]["rows"][rowid]
    after[table]["rows"][rowid] = gt[table]["rows"][rowid]
    assert after == gt
    errs, _ = errors_by_object(d.path, pristine_db)
    assert set(errs) == d.expect_errors_in == {"sessions"}
    deep, _ = errors_by_object(d.path, pristine_db, "integrity_check")
    assert set(deep) == d.deep_errors_in and "idx_sessions_started" in deep


def test_interior_page_zeroed(damaged, pristine_db):
    d = damaged("interior_page_zeroed")
    (target,) = d.pages
    assert not d.extra["was_root"]
    errs, _ = errors_by_object(d.path, pristine_db)
    assert set(errs) == d.expect_errors_in == {"messages"}
    with pytest.raises(sqlite3.DatabaseError):
        ro(d.path).execute("SELECT count(*) FROM messages NOT INDEXED").fetchall()
    with pagefile.PageFile(pristine_db) as src, pagefile.PageFile(d.path) as out:
        assert out.read_page(target) == bytes(out.page_size)
        _, leaves = src.walk(target)
        still = {c.rowid for pg in leaves for c in out.cells(out.parse_page(pg))}
    assert still == d.unreachable["messages"] and len(still) > 100
    assert d.expected_rows["messages"] == set(base_truth(pristine_db)["messages"]["rows"])


def test_page1_damaged(damaged, pristine_db):
    d = damaged("page1_damaged")
    with pytest.raises(sqlite3.DatabaseError, match="not a database"):
        ro(d.path).execute("SELECT count(*) FROM sqlite_schema").fetchall()
    assert not Path(d.path).read_bytes().startswith(pagefile.MAGIC)
    with pagefile.PageFile(pristine_db) as src:
        ps = src.page_size
    assert d.extra["page_size"] == ps
    a, b = Path(pristine_db).read_bytes(), Path(d.path).read_bytes()
    assert a[ps:] == b[ps:], "only page 1 may change"
    _check_schema_from(d, pristine_db)


def _check_schema_from(d, pristine_db):
    sf = ro(d.schema_from)
    assert sf.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    want = {(t, n, s) for t, n, _tb, _r, s in pagefile.schema_objects(pristine_db)}
    got = {(t, n, s) for t, n, _tb, _r, s in pagefile.schema_objects(d.schema_from)}
    assert got == want
    assert one(sf, "SELECT count(*) FROM sessions") == 0


def test_schema_page_damaged(damaged, pristine_db):
    d = damaged("schema_page_damaged")
    (target,) = d.pages
    assert target != 1
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        ro(d.path).execute("SELECT count(*) FROM messages").fetchall()
    with pagefile.PageFile(pristine_db) as src, pagefile.PageFile(d.path) as out:
        assert out.header == src.header
        changed = [p for p in range(1, src.page_count + 1) if src.read_page(p) != out.read_page(p)]
        assert changed == [target]
        _, schema_leaves = src.walk(1)
        assert target in schema_leaves
    _check_schema_from(d, pristine_db)


def test_zero_length(damaged):
    d = damaged("zero_length")
    assert Path(d.path).stat().st_size == 0 and d.expect_verdict == "unreadable"
    assert ro(d.path).execute("SELECT count(*) FROM sqlite_schema").fetchone() == (0,)


def test_not_sqlite(damaged):
    d = damaged("not_sqlite")
    with pytest.raises(sqlite3.DatabaseError, match="not a database"):
        ro(d.path).execute("SELECT count(*) FROM sqlite_schema").fetchall()


def test_missing(damaged):
    d = damaged("missing")
    assert not any(Path(d.path + s).exists() for s in build.SIDECARS)
    with pytest.raises(sqlite3.OperationalError):
        ro(d.path)


def test_garbage_huge_rowid(damaged, pristine_db):
    d = damaged("garbage_huge_rowid")
    table, old, new = d.rewritten_rowid
    assert new > 1e12
    con = ro(d.path)
    assert con.execute("PRAGMA quick_check").fetchall() == [("ok",)]
    assert one(con, f"SELECT max(rowid) FROM {table} NOT INDEXED") == new
    gt, after = base_truth(pristine_db)[table], base_truth(d.path)[table]
    assert after["rows"][new] == gt["rows"][old] and old not in after["rows"]
    assert after["count"] == gt["count"]
    deep, _ = errors_by_object(d.path, pristine_db, "integrity_check")
    assert set(deep) == d.deep_errors_in and "sqlite_autoindex_sessions_1" in deep
    assert d.expected_rows[table] == (set(gt["rows"]) - {old}) | {new}


def test_garbage_leaf_pages(damaged, pristine_db):
    d = damaged("garbage_leaf_pages")
    pages = truth.rows_on_pages(pristine_db, "messages")
    assert d.lost_rows["messages"] == {r for pg in d.pages for r in pages[pg]}
    errs, _ = errors_by_object(d.path, pristine_db)
    assert set(errs) == d.expect_errors_in == {"messages"}
    with pagefile.PageFile(pristine_db) as src, pagefile.PageFile(d.path) as out:
        changed = [p for p in range(1, src.page_count + 1) if src.read_page(p) != out.read_page(p)]
        assert changed == sorted(d.pages) and len(changed) == 3
        for pg in d.pages:
            with pytest.raises(ValueError):
                out.parse_page(pg)
    assert d.expected_rows["messages"] == set(base_truth(pristine_db)["messages"]["rows"]) - d.lost_rows["messages"]


def test_page_referenced_twice(damaged, pristine_db):
    d = damaged("page_referenced_twice")
    a, b = d.extra["twice_referenced"], d.extra["orphaned"]
    dup, orphan = d.duplicated["messages"], d.unreachable["messages"]
    lines, _ = pragma_lines(d.path, "PRAGMA quick_check(1000000)")
    assert any(f"2nd reference to page {a}" in l for l in lines)
    errs, _ = errors_by_object(d.path, pristine_db)
    assert set(errs) == d.expect_errors_in == {"messages"}
    deep, _ = errors_by_object(d.path, pristine_db, "integrity_check")
    assert set(deep) == d.deep_errors_in
    scan = Counter(r[0] for r in ro(d.path).execute("SELECT rowid FROM messages NOT INDEXED"))
    assert {r for r, k in scan.items() if k == 2} == dup
    assert not set(scan) & orphan
    n = base_truth(pristine_db)["messages"]["count"]
    assert sum(scan.values()) == n - len(orphan) + len(dup)
    with pagefile.PageFile(d.path) as out:
        assert {c.rowid for c in out.cells(out.parse_page(b))} == orphan


def test_sessions_leaf_lost_write(damaged, pristine_db):
    """One page differs from the later state: it is, byte for byte, that page of the earlier
    state (pristine_db), well-formed; the indexes hold the later rows."""
    d = damaged("sessions_leaf_lost_write")
    leaf = d.extra["leaf"]
    with pagefile.PageFile(d.truth_path) as later, pagefile.PageFile(d.path) as out, \
            pagefile.PageFile(pristine_db) as early:
        changed = [p for p in range(1, later.page_count + 1) if later.read_page(p) != out.read_page(p)]
        assert changed == [leaf] == d.pages
        assert out.read_page(leaf) == early.read_page(leaf) != later.read_page(leaf)
    errs, _ = errors_by_object(d.path, pristine_db)
    assert set(errs) == d.expect_errors_in == set()          # quick_check: ok
    deep, _ = errors_by_object(d.path, pristine_db, "integrity_check")
    assert set(deep) == d.deep_errors_in
    (victim,) = d.deleted_in_file["sessions"]
    now, later_rows = base_truth(d.path)["sessions"], base_truth(d.truth_path)["sessions"]
    assert victim in now["rows"] and victim not in later_rows["rows"]
    assert victim in base_truth(pristine_db)["sessions"]["rows"]
    cols = now["columns"]
    for rid, old in d.extra["stale"].items():
        assert "title" in old and old
        for col, v in old.items():
            assert now["rows"][rid][cols.index(col)] == v != later_rows["rows"][rid][cols.index(col)]
    con = ro(d.path)
    titles = dict(con.execute("SELECT rowid, title FROM sessions INDEXED BY idx_sessions_title_unique "
                              "WHERE title IS NOT NULL"))
    for rid in d.extra["stale"]:
        assert titles[rid] == later_rows["rows"][rid][cols.index("title")]
    ids = {r[0] for r in con.execute("SELECT rowid FROM sessions INDEXED BY sqlite_autoindex_sessions_1")}
    assert victim not in ids and ids == set(later_rows["rows"]) == d.expected_rows["sessions"]


def test_interior_child_pointer_bit_flipped(damaged, pristine_db):
    d = damaged("interior_child_pointer_bit_flipped")
    (root,) = d.pages
    was, now = d.extra["orphaned"], d.extra["now_named"]
    with pagefile.PageFile(pristine_db) as src, pagefile.PageFile(d.path) as out:
        a, b = src.read_page(root), out.read_page(root)
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        assert len(diff) == 1 and a[diff[0]] ^ b[diff[0]] == 1
        assert out.parse_page(root).right_child == now == was ^ 1
        assert {c.rowid for c in out.cells(out.parse_page(was))} == d.unreachable["sessions"]
    errs, _ = errors_by_object(d.path, pristine_db)
    assert set(errs) == d.expect_errors_in
    deep, _ = errors_by_object(d.path, pristine_db, "integrity_check")
    assert set(deep) == d.deep_errors_in
    scan = {r[0] for r in ro(d.path).execute("SELECT rowid FROM sessions NOT INDEXED")}
    assert not scan & d.unreachable["sessions"]
    assert d.expected_rows["sessions"] == set(base_truth(pristine_db)["sessions"]["rows"])


def test_torn_wal(damaged, pristine_db):
    d = damaged("torn_wal")
    wal = Path(d.path + "-wal")
    with pagefile.PageFile(d.path) as pf:
        ps = pf.page_size
    assert (wal.stat().st_size - 32) % (24 + ps) != 0, "the WAL must end inside a frame"
    con = ro(d.path)
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()
    assert base_truth(d.path) == base_truth(d.truth_path)
    meta = d.extra["wal_meta"]
    assert d.lost_rows["messages"] == {meta["last_txn_message_id"]}
    assert d.extra["wal_only_rows"]["messages"] == set(meta["wal_message_ids"]) - {meta["last_txn_message_id"]}
    assert d.extra["wal_only_rows"]["sessions"], "the WAL's new session lives only in WAL frames"
    assert d.expected_rows == truth.rowids(truth.ground_truth(d.truth_path))


def test_deleted_on_freelist(damaged, pristine_db, standard_meta):
    d = damaged("deleted_on_freelist")
    found = d.deleted_on_freelist["messages"]
    assert len(found) > 20
    assert found <= set(standard_meta["deleted_message_ids"])
    with pagefile.PageFile(d.path) as pf:
        trunks, leaves = pf.freelist()
    assert set(d.extra["on_pages"]) <= set(leaves)
    assert not found & set(base_truth(d.path)["messages"]["rows"])
    assert d.expected_rows == truth.rowids(truth.ground_truth(pristine_db))


@pytest.mark.slow
def test_big_preset_is_field_report_size(hermes_venv, tmp_path):
    meta = build.realistic_db(tmp_path / "state.db", big=True)
    con = ro(tmp_path / "state.db")
    assert 380 <= one(con, "SELECT count(*) FROM sessions") <= 400
    assert 25_000 <= one(con, "SELECT count(*) FROM messages") <= 29_000
    assert 230e6 <= meta["size_bytes"]["db"] <= 340e6


def test_hermes_db_fixture_is_a_private_copy(hermes_db, pristine_db):
    assert sha(hermes_db) == sha(pristine_db)
    assert not str(hermes_db).startswith(str(build.CACHE))
    con = sqlite3.connect(hermes_db)  # writable: it is the test's own copy
    con.execute("DELETE FROM state_meta")
    con.commit()


def test_keep_wal_image_and_torn_wal_from_it(standard_meta, tmp_path):
    kept = tmp_path / "kept" / "state.db"
    meta = build.realistic_db(kept, **build.STANDARD, keep_wal=True)
    assert Path(str(kept) + "-wal").stat().st_size > 32
    full = base_truth(kept)["messages"]["rows"]
    main_only = truth.ground_truth(kept, ignore_wal=True)["tables"]["messages"]["rows"]
    assert set(full) - set(main_only) == set(meta["wal_message_ids"])
    d = damage.torn_wal(kept, tmp_path / "torn" / "state.db")
    assert d.lost_rows == {"messages": {meta["last_txn_message_id"]}}
    assert base_truth(d.path) == base_truth(d.truth_path)
