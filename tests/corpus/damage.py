"""Byte-level damage cases with exact ground truth, for the audit (issue 3) and salvage (issue 4).

Each case is ``fn(src_path, out_path) -> Damage``: it copies the healthy image at src (state.db
plus -wal/-shm when present) to out and damages the copy with pagefile.py, never through SQLite,
so the damage looks like what a torn write or a bad disk leaves behind. The returned Damage
says what the audit must conclude and what a perfect salvage must return.

Field names:
- expect_verdict: the audit verdict (healthy, fts_index_damage, index_damage,
  structural_corruption, unreadable, missing).
- expect_errors_in: objects PRAGMA quick_check(N) reports errors in (messages mapped to the
  tree that owns the named page). deep_errors_in: the same for integrity_check(N), which also
  compares indexes with their tables.
- lost_rows: rows on destroyed pages (gone for good). unreachable: rows intact on disk but not
  reachable from their table's root (a page scan can bring them back). duplicated: rows a table
  scan returns twice. expected_rows: rowids a perfect salvage returns, per base table.
- truth_path: a healthy image whose truth.ground_truth() gives the expected values.
- deleted_on_freelist: deleted rows still readable on freelist pages; must never come back.
- deleted_in_file: deleted rows still readable elsewhere (a stale page); must never come back.
"""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple

from . import build, pagefile, truth
from .pagefile import PageFile

VERDICTS = ("healthy", "fts_index_damage", "index_damage", "structural_corruption", "unreadable", "missing")
HUGE_ROWID_BASE = 1_099_511_627_776  # 2**40, about 1.1e12 as in field report 01


@dataclass
class Damage:
    name: str
    description: str
    expect_verdict: str
    path: str = ""
    truth_path: Optional[str] = None
    expect_errors_in: Set[str] = field(default_factory=set)
    deep_errors_in: Set[str] = field(default_factory=set)
    lost_rows: Dict[str, Set[int]] = field(default_factory=dict)
    unreachable: Dict[str, Set[int]] = field(default_factory=dict)
    duplicated: Dict[str, Set[int]] = field(default_factory=dict)
    expected_rows: Dict[str, Set[int]] = field(default_factory=dict)
    nulled: List[Tuple[str, int, str, object]] = field(default_factory=list)  # (table, rowid, column, original)
    rewritten_rowid: Optional[Tuple[str, int, int]] = None  # (table, old rowid, new rowid)
    pages: List[int] = field(default_factory=list)  # pages this case wrote
    schema_from: Optional[str] = None
    deleted_on_freelist: Dict[str, Set[int]] = field(default_factory=dict)
    deleted_in_file: Dict[str, Set[int]] = field(default_factory=dict)
    extra: Dict[str, object] = field(default_factory=dict)


# ---------------------------------------------------------------- helpers

def _rng(name: str) -> random.Random:
    return random.Random(int(hashlib.sha256(name.encode()).hexdigest()[:12], 16))


def _garbage(rng: random.Random, n: int) -> bytes:
    """Random bytes whose first byte is not a b-tree page type, so no reader can take it for one."""
    b = bytearray(rng.getrandbits(8) for _ in range(n))
    while b[0] in pagefile.PAGE_TYPES:
        b[0] = rng.getrandbits(8)
    return bytes(b)


def _start(name: str, src, out) -> Tuple[Path, Path, Dict]:
    src, out = Path(src), Path(out)
    build.copy_image(src, out)
    return src, out, truth.ground_truth(src)


def _base(d: Damage, src: Path, out: Path, gt: Dict) -> Damage:
    """Fill the fields every case shares: paths, expected rows = truth minus lost/rewritten."""
    d.path = str(out)
    d.truth_path = d.truth_path or str(src)
    if not d.expected_rows:
        exp = truth.rowids(gt)
        for t, ids in d.lost_rows.items():
            exp[t] = exp[t] - ids
        if d.rewritten_rowid:
            t, old, new = d.rewritten_rowid
            exp[t] = (exp[t] - {old}) | {new}
        d.expected_rows = exp
    if not d.deleted_on_freelist and src.exists():
        d.deleted_on_freelist = deleted_on_freelist_rows(src, gt)
    assert d.expect_verdict in VERDICTS, d.expect_verdict
    return d


def deleted_on_freelist_rows(src: Path, gt: Dict) -> Dict[str, Set[int]]:
    """Rows of sessions/messages readable on freelist pages that are not live: deleted data.

    Cells are assigned to a table by record shape (column count), only for tables whose
    column count no other table or FTS shadow table shares.
    """
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        counts = {}
        for typ, name, *_ in pagefile.schema_objects(src):
            if typ == "table":
                try:
                    counts[name] = len(con.execute(f'PRAGMA table_info("{name}")').fetchall())
                except sqlite3.Error:
                    pass
    finally:
        con.close()
    out = {}
    for t in ("sessions", "messages"):
        if t not in gt["tables"]:
            continue
        n = counts[t]
        if sum(1 for v in counts.values() if v == n) != 1:
            continue
        live = set(gt["tables"][t]["rows"])
        found = {r for ids in truth.freelist_records(src, n).values() for r in ids}
        out[t] = found - live
    return out


def _leaf_with_cells(pf: PageFile, root: int):
    _, leaves = pf.walk(root)
    for pg in leaves:
        page = pf.parse_page(pg)
        yield pg, page, pf.cells(page)


def _col_index(gt: Dict, table: str, col: str) -> int:
    return gt["tables"][table]["columns"].index(col)


def _indexes_of(src: Path, table: str) -> List[Tuple[str, bool, List[str]]]:
    """(index name, partial?, indexed column names) for every index on ``table``."""
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        out = []
        for _seq, name, _uniq, _origin, partial in con.execute(f'PRAGMA index_list("{table}")'):
            cols = [r[2] for r in con.execute(f'PRAGMA index_info("{name}")')]
            out.append((name, bool(partial), cols))
        return out
    finally:
        con.close()


def _index_hits(src: Path, table: str, rowids) -> Dict[str, int]:
    """index name -> how many of ``rowids`` have an entry in it (partial WHERE clauses evaluated on src)."""
    rowids = sorted(rowids)
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        out = {}
        for name, partial, _cols in _indexes_of(src, table):
            if not rowids:
                out[name] = 0
                continue
            marks = ",".join("?" * len(rowids))
            where = ""
            if partial:
                sql = con.execute("SELECT sql FROM sqlite_schema WHERE name = ?", (name,)).fetchone()[0]
                where = " AND (" + sql[sql.upper().rindex(" WHERE ") + 7:] + ")"
            out[name] = con.execute(f'SELECT count(*) FROM "{table}" NOT INDEXED WHERE rowid IN ({marks}){where}',
                                    rowids).fetchone()[0]
        return out
    finally:
        con.close()


def schema_only_copy(src: Path, dest: Path) -> Path:
    """A healthy, empty database with src's schema, for salvage ``--schema-from``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        dest.unlink()
    objs = pagefile.schema_objects(src)
    virtual = {n for typ, n, _t, _r, sql in objs if sql and sql.upper().startswith("CREATE VIRTUAL TABLE")}
    shadow = {v + s for v in virtual for s in truth.FTS_SHADOW_SUFFIXES}
    con = sqlite3.connect(dest)
    try:
        order = {"table": 0, "index": 1, "view": 2, "trigger": 3}
        for _typ, name, _t, _r, sql in sorted(objs, key=lambda o: order.get(o[0], 9)):
            if sql and not name.startswith("sqlite_") and name not in shadow:
                con.execute(sql)
        con.execute("PRAGMA journal_mode=WAL")
        con.commit()
    finally:
        con.close()
    return dest


# ---------------------------------------------------------------- cases

def healthy(src, out) -> Damage:
    """Untouched copy: the audit must say healthy, salvage must return every row unchanged."""
    src, out, gt = _start("healthy", src, out)
    return _base(Damage("healthy", "untouched copy of a realistic Hermes state.db", "healthy"), src, out, gt)


def fts_pages_overwritten(src, out) -> Damage:
    """Random bytes over 5 messages_fts_trigram_data leaves and 1 messages_fts_data leaf.

    Base tables are untouched, so the audit must say fts_index_damage and salvage must return
    every row (the FTS index is rebuilt, never copied). Leaves with overflow chains are avoided
    so no orphaned pages blur the picture.
    """
    src, out, gt = _start("fts_pages_overwritten", src, out)
    rng = _rng("fts_pages_overwritten")
    roots = pagefile.root_pages(src)
    written, blocks = [], {}
    with PageFile(out, writable=True) as pf:
        for tree, k in (("messages_fts_trigram_data", 5), ("messages_fts_data", 1)):
            clean = [pg for pg, page, cells in _leaf_with_cells(pf, roots[tree])
                     if cells and all(c.overflow is None for c in cells)]
            step = max(1, len(clean) // (k + 1))
            chosen = [clean[step * (i + 1)] for i in range(k)]
            for pg in chosen:
                blocks.setdefault(tree, []).extend(c.rowid for c in pf.cells(pf.parse_page(pg)))
                pf.write_page(pg, _garbage(rng, pf.page_size))
                written.append(pg)
    d = Damage("fts_pages_overwritten",
               "garbage over 5 messages_fts_trigram_data leaves and 1 messages_fts_data leaf; base tables intact",
               "fts_index_damage", expect_errors_in={"messages_fts_trigram_data", "messages_fts_data"},
               pages=written, extra={"fts_blocks_lost": blocks})
    d.deep_errors_in = set(d.expect_errors_in)
    return _base(d, src, out, gt)


def fts_doclist_bit_flipped(src, out) -> Damage:
    """One bit flipped inside a messages_fts_trigram_data leaf: the size of the first position
    list on the page, so that list claims one position more or less. Every b-tree stays intact
    (SQLite < 3.44's quick_check sees nothing); the index no longer matches what it indexed,
    as after bit rot on disk. Salvage must return every row (the index is rebuilt)."""
    src, out, gt = _start("fts_doclist_bit_flipped", src, out)
    roots = pagefile.root_pages(src)
    with PageFile(out, writable=True) as pf:
        for pg, _page, cells in _leaf_with_cells(pf, roots["messages_fts_trigram_data"]):
            for c in cells:
                if c.overflow is not None or c.rowid <= 10:
                    continue
                body, _, _ = pagefile.record_header(c.payload)     # columns: id (the rowid), block
                blob = c.payload[body:]
                first = struct.unpack(">H", blob[:2])[0]   # a rowid continuing a doclist, else 0
                if first == 0:                             # the page starts with a term at offset 4
                    n, k = pagefile.read_varint(blob, 4)
                    first = 4 + k + n
                if not 4 <= first < len(blob) - 8:
                    continue
                _, k = pagefile.read_varint(blob, first)
                size = blob[first + k]                     # 2 * positions + delete flag
                if size >= 0x80 or size >> 1 < 2:
                    continue
                data = bytearray(pf.read_page(pg))
                at = data.find(c.payload)
                assert at >= 0 and data.find(c.payload, at + 1) < 0
                data[at + body + first + k] ^= 0x02
                pf.write_page(pg, bytes(data))
                d = Damage("fts_doclist_bit_flipped",
                           "one bit of a position-list size in a messages_fts_trigram_data leaf; every b-tree intact",
                           "fts_index_damage", pages=[pg], extra={"fts_block": c.rowid})
                return _base(d, src, out, gt)
    raise AssertionError("no trigram leaf with a short position list to flip")


def session_duplicated_behind_title_index(src, out) -> Damage:
    """A titled sessions leaf cell stored twice, side by side on its page (field report 02).

    A table scan returns the row twice (count(*) NOT INDEXED = n+1), every index, including the
    unique title index, still has it once (count(*) = n). A cron session is preferred, like the
    report's cron_d0aa05fd7f4a_... row.
    """
    src, out, gt = _start("session_duplicated_behind_title_index", src, out)
    ti = _col_index(gt, "sessions", "title")
    ii = _col_index(gt, "sessions", "id")
    root = pagefile.root_pages(src)["sessions"]
    candidates = []
    with PageFile(out, writable=True) as pf:
        for pg, _page, cells in _leaf_with_cells(pf, root):
            for i, c in enumerate(cells):
                if c.overflow is not None:
                    continue
                vals = pagefile.decode_record(c.payload)
                if vals[ti] is None:
                    continue
                candidates.append((not str(vals[ii]).startswith("cron_"), c.size, pg, i, vals[ii], vals[ti]))
        for _not_cron, _size, pg, i, sid, title in sorted(candidates):  # noqa: B007 (sid, title: the one the loop breaks on)
            page = pf.parse_page(pg)
            cells = pf.cells(page)
            imgs = [pf.cell_image(page, c) for c in cells]
            imgs.insert(i + 1, imgs[i])
            try:
                img = pf.build_page(page, imgs)
            except ValueError:
                continue  # no room on this page; try the next candidate
            pf.write_page(pg, img)
            rowid = cells[i].rowid
            break
        else:
            raise RuntimeError("no sessions leaf has room to duplicate a titled row")
    d = Damage("session_duplicated_behind_title_index",
               f"sessions row {rowid} ({sid}) stored twice on leaf page {pg}; indexes hold it once",
               "structural_corruption", expect_errors_in={"sessions"},
               deep_errors_in={"sessions"} | {n for n, k in _index_hits(src, "sessions", [rowid]).items() if k},
               duplicated={"sessions": {rowid}}, pages=[pg],
               extra={"session_id": sid, "title": title, "rowid": rowid})
    return _base(d, src, out, gt)


def unique_index_emptied(src, out) -> Damage:
    """idx_sessions_title_unique emptied: its root becomes a leaf with zero cells.

    Any other pages of the index are put on the freelist so only the index disagrees with
    its table. quick_check does not compare indexes with tables: only integrity_check (the
    audit's --deep) or a count through the index sees it. Salvage loses nothing.
    """
    src, out, gt = _start("unique_index_emptied", src, out)
    name = "idx_sessions_title_unique"
    root = pagefile.root_pages(src)[name]
    with PageFile(out, writable=True) as pf:
        interior, leaves = pf.walk(root)
        page = pf.parse_page(root)
        others = [p for p in interior + leaves if p != root]
        page.type = pagefile.LEAF_INDEX
        pf.write_page(root, pf.build_page(page, []))
        if others:
            pf.add_to_freelist(others)
    d = Damage("unique_index_emptied", f"{name} root page {root} rewritten with zero cells",
               "index_damage", expect_errors_in=set(), deep_errors_in={name},
               pages=[root] + others, extra={"index": name, "retired_pages": others})
    return _base(d, src, out, gt)


def not_null_nulled(src, out) -> Damage:
    """One sessions.started_at turned NULL by rewriting its serial type 7 -> 0 in the record header.

    The 8 body bytes of the REAL are removed and the payload length updated, so the record
    stays well-formed; the page is rewritten defragmented. quick_check reports the NOT NULL
    violation; integrity_check also finds the indexes on started_at disagreeing.
    """
    src, out, gt = _start("not_null_nulled", src, out)
    col = _col_index(gt, "sessions", "started_at")
    root = pagefile.root_pages(src)["sessions"]
    rng = _rng("not_null_nulled")
    with PageFile(out, writable=True) as pf:
        choices = [(pg, i) for pg, page, cells in _leaf_with_cells(pf, root)
                   for i, c in enumerate(cells) if c.overflow is None]
        pg, i = choices[rng.randrange(len(choices))]
        page = pf.parse_page(pg)
        cells = pf.cells(page)
        c = cells[i]
        hdr_len, _n, types = pagefile.record_header(c.payload)
        st, st_off = types[col]
        assert st == 7, f"started_at serial type {st}, expected a REAL"
        body_off = hdr_len + sum(pagefile.serial_size(t) for t, _ in types[:col])
        original = struct.unpack(">d", c.payload[body_off:body_off + 8])[0]
        payload = bytearray(c.payload)
        payload[st_off] = 0
        del payload[body_off:body_off + 8]
        new_cell = pagefile.encode_varint(len(payload)) + pagefile.encode_varint(c.rowid) + bytes(payload)
        imgs = [pf.cell_image(page, x) for x in cells]
        imgs[i] = new_cell
        pf.write_page(pg, pf.build_page(page, imgs))
        rowid = c.rowid
    hits = _index_hits(src, "sessions", [rowid])
    idx = {n for n, _p, cols in _indexes_of(src, "sessions") if "started_at" in cols and hits[n]}
    d = Damage("not_null_nulled", f"sessions row {rowid}: started_at serial type 7 -> 0 (NULL) on page {pg}",
               "structural_corruption", expect_errors_in={"sessions"}, deep_errors_in={"sessions"} | idx,
               nulled=[("sessions", rowid, "started_at", original)], pages=[pg])
    return _base(d, src, out, gt)


def interior_page_zeroed(src, out) -> Damage:
    """A non-root interior page of messages zeroed (the root only if the tree has no other).

    Its leaves stay intact on disk but the b-tree walk cannot reach them: ``unreachable``
    lists their rows. A perfect salvage gets them back by page scan, so expected_rows is all.
    """
    src, out, gt = _start("interior_page_zeroed", src, out)
    root = pagefile.root_pages(src)["messages"]
    with PageFile(out, writable=True) as pf:
        interior, _ = pf.walk(root)
        non_root = [p for p in interior if p != root]
        target = non_root[len(non_root) // 2] if non_root else root
        lost_ids = set(truth.rows_under(src, target))
        pf.write_page(target, bytes(pf.page_size))
    d = Damage("interior_page_zeroed", f"messages interior page {target} zeroed ({len(lost_ids)} rows cut off)",
               "structural_corruption", expect_errors_in={"messages"},
               unreachable={"messages": lost_ids}, pages=[target],
               extra={"was_root": target == root})
    d.deep_errors_in = {"messages"}
    return _base(d, src, out, gt)


def page1_damaged(src, out) -> Damage:
    """The 100-byte file header and page 1's b-tree header and cell pointers overwritten.

    The file is no longer a SQLite database ("file is not a database"). Every data page is
    intact: with ``schema_from`` (a healthy empty file of the same schema) and the page size
    in ``extra`` a page-scan salvage can return every row.
    """
    src, out, gt = _start("page1_damaged", src, out)
    rng = _rng("page1_damaged")
    with PageFile(out, writable=True) as pf:
        page = pf.parse_page(1)
        end = page.pointer_array_end
        data = bytearray(pf.read_page(1))
        data[:end] = bytes(rng.getrandbits(8) for _ in range(end))
        data[:16] = b"Hermes crashed!\x00"  # no magic: no reader can mistake it for SQLite
        page_size = pf.page_size
        pf.write_page(1, bytes(data))
    sf = schema_only_copy(src, out.parent / "schema-from" / "state.db")
    d = Damage("page1_damaged", f"bytes 0..{end} of page 1 (file header, sqlite_schema root header) overwritten",
               "unreadable", pages=[1], schema_from=str(sf), extra={"page_size": page_size})
    return _base(d, src, out, gt)


def schema_page_damaged(src, out) -> Damage:
    """Cell content of the sqlite_schema leaf that defines ``messages`` overwritten with garbage.

    The file header is intact, so the file opens, but the schema cannot be parsed: every
    statement fails with "malformed database schema". All table pages are intact:
    ``schema_from`` gives the schema back.
    """
    src, out, gt = _start("schema_page_damaged", src, out)
    rng = _rng("schema_page_damaged")
    with PageFile(out, writable=True) as pf:
        target = None
        for pg, _page, cells in _leaf_with_cells(pf, 1):
            for c in cells:
                vals = pagefile.decode_record(pf.full_payload(c))
                if vals[1] == "messages":
                    target = pg
        page = pf.parse_page(target)
        data = bytearray(page.data)
        start = page.content_start
        data[start:pf.usable] = bytes(rng.getrandbits(8) for _ in range(pf.usable - start))
        pf.write_page(target, bytes(data))
    sf = schema_only_copy(src, out.parent / "schema-from" / "state.db")
    d = Damage("schema_page_damaged", f"cell content of sqlite_schema page {target} overwritten",
               "unreadable", expect_errors_in=set(), pages=[target], schema_from=str(sf))
    return _base(d, src, out, gt)


def zero_length(src, out) -> Damage:
    """state.db exists with 0 bytes (what a failed copy or a full disk leaves). Nothing to salvage."""
    src, out = Path(src), Path(out)
    _clear(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"")
    return Damage("zero_length", "empty state.db", "unreadable", path=str(out), expected_rows={})


def not_sqlite(src, out) -> Damage:
    """A text file named state.db (someone redirected a log into it). Not a database."""
    src, out = Path(src), Path(out)
    _clear(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(f"2026-09-07 17:05:{i % 60:02d} WARNING gateway.session: state.db routing "
                           f"save failed: database disk image is malformed\n" for i in range(300)))
    return Damage("not_sqlite", "a text log written over state.db", "unreadable", path=str(out), expected_rows={})


def missing(src, out) -> Damage:
    """No state.db and no sidecars at the path (profile never used, or the file was removed)."""
    out = Path(out)
    _clear(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return Damage("missing", "no state.db", "missing", path=str(out), expected_rows={})


def _clear(out: Path) -> None:
    for s in build.SIDECARS:
        p = Path(str(out) + s)
        if p.exists():
            p.unlink()


def garbage_huge_rowid(src, out) -> Damage:
    """The last sessions row (rightmost leaf, last cell) renumbered to rowid 2**40 + old (~1.1e12).

    It stays the largest key on the rightmost leaf, so the page and the table b-tree are
    valid and quick_check passes; but every sessions index still points at the old rowid,
    which integrity_check reports. The trap of field report 01: max(rowid) is ~1.1e12 and a
    window scanner walks a billion empty windows. A perfect salvage keeps the row once.
    """
    src, out, gt = _start("garbage_huge_rowid", src, out)
    root = pagefile.root_pages(src)["sessions"]
    with PageFile(out, writable=True) as pf:
        _, leaves = pf.walk(root)
        pg = leaves[-1]
        page = pf.parse_page(pg)
        cells = pf.cells(page)
        c = cells[-1]
        old = c.rowid
        new = HUGE_ROWID_BASE + old
        img = pf.cell_image(page, c)
        _plen, n1 = pagefile.read_varint(img, 0)
        _rid, n2 = pagefile.read_varint(img, n1)
        imgs = [pf.cell_image(page, x) for x in cells]
        imgs[-1] = img[:n1] + pagefile.encode_varint(new) + img[n1 + n2:]
        pf.write_page(pg, pf.build_page(page, imgs))
    idx = {n for n, k in _index_hits(src, "sessions", [old]).items() if k}
    d = Damage("garbage_huge_rowid", f"sessions rowid {old} rewritten as {new} on rightmost leaf {pg}",
               "index_damage", expect_errors_in=set(), deep_errors_in=idx,
               rewritten_rowid=("sessions", old, new), pages=[pg])
    return _base(d, src, out, gt)


def garbage_leaf_pages(src, out) -> Damage:
    """Random bytes over 3 messages leaf pages (at 1/4, 1/2, 3/4 of the table).

    Their rows are lost for good (``lost_rows``); their overflow pages become orphans.
    Everything else must come back.
    """
    src, out, gt = _start("garbage_leaf_pages", src, out)
    rng = _rng("garbage_leaf_pages")
    pages = truth.rows_on_pages(src, "messages")
    order = list(pages)
    chosen = [order[len(order) * k // 4] for k in (1, 2, 3)]
    lost = {r for pg in chosen for r in pages[pg]}
    with PageFile(out, writable=True) as pf:
        for pg in chosen:
            pf.write_page(pg, _garbage(rng, pf.page_size))
    d = Damage("garbage_leaf_pages", f"messages leaf pages {chosen} overwritten with random bytes",
               "structural_corruption", expect_errors_in={"messages"}, deep_errors_in={"messages"},
               lost_rows={"messages": lost}, pages=chosen)
    return _base(d, src, out, gt)


def page_referenced_twice(src, out) -> Damage:
    """In a messages interior page, cell i+1's child pointer set to cell i's child.

    Leaf A (cell i's child) is now referenced twice, so a table scan returns its rows twice
    (``duplicated``); leaf B (cell i+1's old child) is orphaned (``unreachable``). Nothing is
    destroyed: a perfect salvage returns every row exactly once.
    """
    src, out, gt = _start("page_referenced_twice", src, out)
    root = pagefile.root_pages(src)["messages"]
    with PageFile(out, writable=True) as pf:
        interior, _ = pf.walk(root)
        non_root = [p for p in interior if p != root]
        target = non_root[0] if non_root else root
        page = pf.parse_page(target)
        cells = pf.cells(page)
        i = len(cells) // 2
        a, b = cells[i].left_child, cells[i + 1].left_child
        pa, pb = pf.parse_page(a), pf.parse_page(b)
        if not (pa.is_leaf and pb.is_leaf):
            raise RuntimeError("expected leaf children under the chosen interior page")
        rows_a = {c.rowid for c in pf.cells(pa)}
        rows_b = {c.rowid for c in pf.cells(pb)}
        data = bytearray(page.data)
        struct.pack_into(">I", data, cells[i + 1].offset, a)
        pf.write_page(target, bytes(data))
    d = Damage("page_referenced_twice",
               f"messages interior page {target}: cell {i + 1} now points at leaf {a} (cell {i}'s); leaf {b} orphaned",
               "structural_corruption", expect_errors_in={"messages"},
               deep_errors_in={"messages"} | {n for n, k in _index_hits(src, "messages", rows_a).items()
                                              if k != _index_hits(src, "messages", rows_b)[n]},
               duplicated={"messages": rows_a}, unreachable={"messages": rows_b}, pages=[target],
               extra={"twice_referenced": a, "orphaned": b})
    return _base(d, src, out, gt)


def _wal_frames(wal: Path, page_size: int) -> List[Tuple[int, int, int]]:
    """(offset, page number, commit size) of every frame whose salts match the WAL header."""
    data = wal.read_bytes()
    if len(data) < 32:
        return []
    magic, _ver, ps, _seq, s1, s2 = struct.unpack(">IIIIII", data[:24])
    if magic not in (0x377F0682, 0x377F0683) or ps != page_size:
        raise ValueError(f"{wal}: not a WAL for page size {page_size}")
    frames, off = [], 32
    while off + 24 + ps <= len(data):
        pgno, commit, fs1, fs2 = struct.unpack(">IIII", data[off:off + 16])
        if (fs1, fs2) != (s1, s2):
            break
        frames.append((off, pgno, commit))
        off += 24 + ps
    return frames


def torn_wal(src, out) -> Damage:
    """A WAL image whose last frame (the commit frame of its last transaction) is cut in half.

    If src has no WAL, a final conversation is first added in committed WAL frames with the
    real SessionDB (build.add_wal_tail). SQLite ignores the torn transaction and keeps every
    committed frame before it, so the audit says healthy; a salvage that reads only the main
    file misses the WAL's conversation, one that replays the torn frame invents rows.
    ``truth_path`` is a checkpointed copy of the image without the last transaction.
    """
    src = Path(src)
    out = Path(out)
    wal_src = Path(str(src) + "-wal")
    if wal_src.exists() and wal_src.stat().st_size > 32:
        build.copy_image(src, out)
        meta = {}
    else:
        meta = build.add_wal_tail(src, out)
    full_truth = truth.ground_truth(out)  # image with every committed frame
    with PageFile(out) as pf:
        page_size = pf.page_size
    wal = Path(str(out) + "-wal")
    frames = _wal_frames(wal, page_size)
    commits = [k for k, (_o, _p, c) in enumerate(frames) if c]
    if len(commits) < 2:
        raise RuntimeError("torn_wal needs at least two committed transactions in the WAL")
    last, prev = commits[-1], commits[-2]
    # reference image: the WAL cut cleanly after the previous commit, checkpointed into one file
    ref_dir = out.parent / "truth"
    ref_work = ref_dir / "work" / "state.db"
    build.copy_image(out, ref_work)
    keep = frames[prev][0] + 24 + page_size
    with open(str(ref_work) + "-wal", "r+b") as fh:
        fh.truncate(keep)
    if Path(str(ref_work) + "-shm").exists():
        os.unlink(str(ref_work) + "-shm")
    ref = ref_dir / "state.db"
    s = sqlite3.connect(f"file:{ref_work}?mode=ro", uri=True)
    d_ = sqlite3.connect(ref)
    s.backup(d_)
    s.close()
    d_.close()
    shutil.rmtree(ref_dir / "work")
    expected_truth = truth.ground_truth(ref)
    # tear: keep the frame header and half of the page image of the last frame
    torn_at = frames[last][0] + 24 + page_size // 2
    with open(wal, "r+b") as fh:
        fh.truncate(torn_at)
    lost = {t: set(v["rows"]) - set(expected_truth["tables"].get(t, {"rows": {}})["rows"])
            for t, v in full_truth["tables"].items()}
    lost = {t: ids for t, ids in lost.items() if ids}
    d = Damage("torn_wal", f"WAL truncated at byte {torn_at}, inside its last frame (frame {last + 1} of {len(frames)})",
               "healthy", path=str(out), truth_path=str(ref), lost_rows=lost,
               expected_rows=truth.rowids(expected_truth),
               extra={"frames": len(frames), "frames_committed_kept": prev + 1,
                      "last_txn_frames": last - prev, "wal_meta": meta})
    # rows that exist only in committed WAL frames: a salvage reading the main file alone misses them
    main_only = truth.ground_truth(out, ignore_wal=True)
    d.extra["wal_only_rows"] = {t: ids - set(main_only["tables"].get(t, {"rows": {}})["rows"])
                                for t, ids in d.expected_rows.items()}
    d.deleted_on_freelist = deleted_on_freelist_rows(ref, expected_truth)
    return d


def deleted_on_freelist(src, out) -> Damage:
    """No damage: a db whose deleted sessions/messages still sit, readable, on freelist pages.

    Ground truth for "a deleted session must stay deleted": ``deleted_on_freelist`` lists the
    rowids a page scan can see on freelist pages although the table does not hold them.
    Needs a source built with deleted > 0 (build.STANDARD has 4).
    """
    src, out, gt = _start("deleted_on_freelist", src, out)
    found = deleted_on_freelist_rows(src, gt)
    if not any(found.values()):
        raise ValueError(f"{src}: no deleted rows on freelist pages (build it with deleted > 0)")
    with PageFile(src) as pf:
        trunks, leaves = pf.freelist()
    d = Damage("deleted_on_freelist",
               f"{sum(map(len, found.values()))} deleted rows readable on {len(trunks) + len(leaves)} freelist pages",
               "healthy", deleted_on_freelist=found,
               extra={"freelist_pages": len(trunks) + len(leaves), "on_pages": truth.freelist_rows(src)})
    return _base(d, src, out, gt)


# ---------------------------------------------------------------- cases on a store whose deleted
# sessions (not only messages) sit on freelist pages: damage the evidence of what is free

def _with_deleted_run(name: str, src, out) -> Tuple[Path, Path, Dict]:
    """The healthy store with a run of sessions deleted by the real SessionDB
    (secure_delete=OFF), copied to ``out``; returns (truth image, out, its ground truth)."""
    out = Path(out)
    ref = out.parent / "truth" / "state.db"
    build.with_deleted_run(src, ref)
    build.copy_image(ref, out)
    return ref, out, truth.ground_truth(ref)


def _readable_rows(ref: Path, keep_pages: int, cut_chains: Optional[Dict[str, Set[int]]] = None
                   ) -> Dict[str, Set[int]]:
    """Per base table, rows a cut at ``keep_pages`` pages leaves readable: their leaf, every
    interior page above it and every overflow page of the row inside the kept pages. Rows on
    a kept leaf whose chain runs past the cut go into ``cut_chains``."""
    out: Dict[str, Set[int]] = {}
    roots = pagefile.root_pages(ref)
    with PageFile(ref) as pf:
        for t in truth.base_tables(ref):
            ids: Set[int] = set()

            def visit(pgno: int, ids: Set[int] = ids, t: str = t) -> None:
                if pgno > keep_pages:
                    return
                page = pf.parse_page(pgno)
                if not page.is_leaf:
                    for c in pf.cells(page):
                        visit(c.left_child)
                    visit(page.right_child)
                    return
                for c in pf.cells(page):
                    if all(x <= keep_pages for x in pf.overflow_chain(c.overflow)):
                        ids.add(c.rowid)
                    elif cut_chains is not None:
                        cut_chains.setdefault(t, set()).add(c.rowid)

            visit(roots[t])
            out[t] = ids
    return out


def _fk_closure(ref: Path, gt: Dict, rows: Dict[str, Set[int]]):
    """Apply salvage's documented foreign-key rules to a set of surviving rows: a row whose
    NOT NULL reference lost its parent goes (quarantined), a nullable one is set to NULL.
    Returns (rows kept per table, [(table, rowid, column, original)] set to NULL)."""
    con = sqlite3.connect(f"file:{ref}?mode=ro", uri=True)
    try:
        fks = {t: [(r[2], r[3], r[4]) for r in con.execute(f'PRAGMA foreign_key_list("{t}")')]
               for t in rows}
        notnull = {t: {r[1] for r in con.execute(f'PRAGMA table_info("{t}")') if r[3]} for t in rows}
    finally:
        con.close()
    rows = {t: set(ids) for t, ids in rows.items()}
    nulled = []
    changed = True
    while changed:
        changed = False
        for t, refs in fks.items():
            cols = gt["tables"][t]["columns"]
            for parent, col, pcol in refs:
                pcols = gt["tables"][parent]["columns"]
                have = {gt["tables"][parent]["rows"][r][pcols.index(pcol or "id")] for r in rows[parent]}
                for rid in sorted(rows[t]):
                    v = gt["tables"][t]["rows"][rid][cols.index(col)]
                    if v is None or v in have:
                        continue
                    if col in notnull[t]:
                        rows[t].discard(rid)
                        changed = True
                    elif (t, rid, col, v) not in nulled:
                        nulled.append((t, rid, col, v))
    return rows, nulled


def freelist_trunk_pointer_damaged(src, out) -> Damage:
    """The header's first-trunk pointer (offset 32) set to a live messages leaf page.

    The freelist cannot be read (the "trunk" is a b-tree page), so every former free page
    looks orphaned; the store has deleted sessions and messages on them. Every b-tree is
    whole: every live row comes back and no deleted one.
    """
    ref, out, gt = _with_deleted_run("freelist_trunk_pointer_damaged", src, out)
    root = pagefile.root_pages(ref)["messages"]
    with PageFile(out, writable=True) as pf:
        _, leaves = pf.walk(root)
        target = leaves[len(leaves) // 3]
        pf.write_header_field(32, ">I", target)
    d = Damage("freelist_trunk_pointer_damaged",
               f"header freelist trunk pointer set to messages leaf page {target}",
               "structural_corruption", truth_path=str(ref), pages=[1],
               expect_errors_in={"(freelist)", "messages"}, deep_errors_in={"(freelist)", "messages"},
               extra={"trunk_pointer": target})
    d.deleted_on_freelist = deleted_on_freelist_rows(ref, gt)
    return _base(d, ref, out, gt)


def freelist_trunk_page_damaged(src, out) -> Damage:
    """Random bytes over the first freelist trunk page: the pages it listed (deleted rows
    on many of them) are no longer known to be free. Every b-tree is whole."""
    ref, out, gt = _with_deleted_run("freelist_trunk_page_damaged", src, out)
    rng = _rng("freelist_trunk_page_damaged")
    with PageFile(out, writable=True) as pf:
        trunks, _ = pf.freelist()
        pf.write_page(trunks[0], _garbage(rng, pf.page_size))
    d = Damage("freelist_trunk_page_damaged", f"freelist trunk page {trunks[0]} overwritten",
               "structural_corruption", truth_path=str(ref), pages=[trunks[0]],
               expect_errors_in={"(freelist)"}, deep_errors_in={"(freelist)"})
    d.deleted_on_freelist = deleted_on_freelist_rows(ref, gt)
    return _base(d, ref, out, gt)


def truncated_copy(src, out) -> Damage:
    """The file cut at 60 % of its bytes, off a page boundary (a copy that ran out of disk
    or was interrupted). Rows whose leaf, interior path or overflow chain lay past the cut
    are gone; a freelist trunk past the cut leaves the pages it listed unknown."""
    ref, out, gt = _with_deleted_run("truncated_copy", src, out)
    with PageFile(ref) as pf:
        page_size = pf.page_size
    size = out.stat().st_size
    cut = int(size * 0.6) - 1000
    keep = cut // page_size
    with open(out, "r+b") as fh:
        fh.truncate(cut)
    cut_chains: Dict[str, Set[int]] = {}
    on_pages = _readable_rows(ref, keep, cut_chains)
    readable, nulled = _fk_closure(ref, gt, on_pages)
    lost = {t: set(v["rows"]) - readable[t] for t, v in gt["tables"].items()}
    d = Damage("truncated_copy", f"cut at byte {cut} of {size} ({keep} whole pages kept)",
               "unreadable", truth_path=str(ref),
               lost_rows={t: ids for t, ids in lost.items() if ids}, nulled=nulled,
               extra={"cut": cut, "pages_kept": keep,
                      "fk_dropped": {t: on_pages[t] - readable[t] for t in readable},
                      "chain_cut": cut_chains})
    d.deleted_on_freelist = deleted_on_freelist_rows(ref, gt)
    return _base(d, ref, out, gt)


def header_zeroed(src, out) -> Damage:
    """The 100-byte file header zeroed (magic, page size, freelist pointer and count gone);
    every page intact. ``schema_from`` is given; the free pages must be found again."""
    ref, out, gt = _with_deleted_run("header_zeroed", src, out)
    with PageFile(out, writable=True) as pf:
        page_size = pf.page_size
        data = bytearray(pf.read_page(1))
        data[:100] = bytes(100)
        pf.write_page(1, bytes(data))
    sf_ = schema_only_copy(ref, out.parent / "schema-from" / "state.db")
    d = Damage("header_zeroed", "bytes 0..99 (the file header) zeroed", "unreadable",
               truth_path=str(ref), pages=[1], schema_from=str(sf_),
               extra={"page_size": page_size})
    d.deleted_on_freelist = deleted_on_freelist_rows(ref, gt)
    return _base(d, ref, out, gt)


def interior_points_at_foreign_leaf(src, out) -> Damage:
    """A messages interior cell's child pointer set to a sessions leaf (a misdirected write).

    SQLite's walk of messages then reads that sessions leaf as messages rows with the keys of
    the leaf it replaced; the replaced leaf is orphaned but intact. Two versions of those keys:
    the foreign one (from the walk) and the intact one (page scan). Every row comes back, once,
    as it was; no sessions row becomes a message.
    """
    src, out, gt = _start("interior_points_at_foreign_leaf", src, out)
    roots = pagefile.root_pages(src)
    with PageFile(out, writable=True) as pf:
        _, s_leaves = pf.walk(roots["sessions"])
        foreign = s_leaves[0]
        f_ids = {c.rowid for c in pf.cells(pf.parse_page(foreign))}
        interior, _ = pf.walk(roots["messages"])
        target = next(p for p in interior if p != roots["messages"]) if len(interior) > 1 else interior[0]
        page = pf.parse_page(target)
        cells = pf.cells(page)
        replaced = cells[0].left_child
        b_ids = {c.rowid for c in pf.cells(pf.parse_page(replaced))}
        data = bytearray(page.data)
        struct.pack_into(">I", data, cells[0].offset, foreign)
        pf.write_page(target, bytes(data))
    d = Damage("interior_points_at_foreign_leaf",
               f"messages interior page {target}: cell 0 points at sessions leaf {foreign} "
               f"instead of messages leaf {replaced}", "structural_corruption",
               expect_errors_in={"messages"}, unreachable={"messages": b_ids}, pages=[target],
               # integrity_check: B's rows are missing from the table, the foreign rows (as
               # SQLite now reads them as messages) from the indexes
               deep_errors_in={"messages"} | {n for n, k in _index_hits(src, "messages", b_ids).items() if k}
               | {n for n, k in _index_hits(out, "messages", f_ids).items() if k},
               extra={"foreign_leaf": foreign, "replaced_leaf": replaced, "foreign_ids": f_ids,
                      "conflicting_keys": f_ids & b_ids})
    return _base(d, src, out, gt)


def schema_page_lost(src, out) -> Damage:
    """The sqlite_schema leaf that holds the DDL of ``messages`` overwritten with random bytes,
    and no healthy schema given: the DDL of the objects on it is gone from the file. Every
    table page is intact; the schema Hermes 0.19.0 creates (shipped with fleetops) gives the
    lost objects back."""
    src, out, gt = _start("schema_page_lost", src, out)
    rng = _rng("schema_page_lost")
    with PageFile(out, writable=True) as pf:
        target, names = None, []
        for pg, _page, cells in _leaf_with_cells(pf, 1):
            here = [pagefile.decode_record(pf.full_payload(c))[1] for c in cells]
            if "messages" in here:
                target, names = pg, here
        if target == 1:
            raise RuntimeError("sqlite_schema is one page: losing it is page1_damaged")
        pf.write_page(target, _garbage(rng, pf.page_size))
    d = Damage("schema_page_lost", f"sqlite_schema leaf page {target} overwritten (DDL of {', '.join(names)})",
               "unreadable", pages=[target], extra={"lost_objects": names})
    return _base(d, src, out, gt)


def _has_fts_copy(src) -> bool:
    """Whether the store's FTS tables keep their own copy of message text (a *_content table)."""
    con = sqlite3.connect("file:%s?mode=ro&immutable=1" % src, uri=True)
    try:
        return bool(con.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_fts_content'").fetchone())
    finally:
        con.close()


def invalid_utf8_in_rows(src, out) -> Damage:
    """One byte of a sessions row's model (a column no index holds) set to 0xFF, and one byte of a messages row's
    content set to 0xC3 followed by an ASCII byte: text that is not valid UTF-8, in place (the
    record stays well-formed). SQLite stores and returns such bytes; only decoding fails. Every
    row comes back, those two with the damaged bytes as TEXT; the session keeps its messages.
    Where the FTS tables keep their own copy of the text (0.19's *_content, written by the
    insert trigger from the text as it was), the message no longer matches it and the audit says
    so: fts_index_damage; an external-content FTS (0.20+) keeps no copy: healthy.
    ``altered`` lists (table, rowid, column, bytes now stored)."""
    src, out, gt = _start("invalid_utf8_in_rows", src, out)
    roots = pagefile.root_pages(src)
    altered = []
    with PageFile(out, writable=True) as pf:
        for table, col, bad in (("sessions", "model", b"\xff"), ("messages", "content", b"\xc3(")):
            ci = _col_index(gt, table, col)
            done = False
            for pg, page, cells in _leaf_with_cells(pf, roots[table]):
                for c in cells:
                    if c.overflow is not None:
                        continue
                    hdr_len, _n, types = pagefile.record_header(c.payload)
                    st = types[ci][0]
                    if st < 13 or st % 2 == 0 or (st - 13) // 2 < 8:
                        continue
                    start = c.offset + c.size - len(c.payload)      # no overflow: all local
                    body = start + hdr_len + sum(pagefile.serial_size(t) for t, _ in types[:ci])
                    data = bytearray(page.data)
                    data[body + 3:body + 3 + len(bad)] = bad
                    pf.write_page(pg, bytes(data))
                    text = bytes(data[body:body + (st - 13) // 2])
                    altered.append((table, c.rowid, col, text))
                    done = True
                    break
                if done:
                    break
    d = Damage("invalid_utf8_in_rows", "; ".join(f"{t} row {r}: {c} no longer valid UTF-8"
                                                 for t, r, c, _ in altered),
               "fts_index_damage" if _has_fts_copy(src) else "healthy", expect_errors_in=set(),
               extra={"altered": altered})
    return _base(d, src, out, gt)


def _header_case(name: str, src, out, what: str, patch, inferred: List[str],
                 schema_from: bool = False) -> Damage:
    ref, out, gt = _with_deleted_run(name, src, out)
    with PageFile(out, writable=True) as pf:
        data = bytearray(pf.read_page(1))
        patch(data)
        pf.write_page(1, bytes(data))
    sf_ = schema_only_copy(ref, out.parent / "schema-from" / "state.db") if schema_from else None
    d = Damage(name, what, "unreadable", truth_path=str(ref), pages=[1],
               schema_from=str(sf_) if sf_ else None, extra={"inferred": inferred})
    d.deleted_on_freelist = deleted_on_freelist_rows(ref, gt)
    return _base(d, ref, out, gt)


def header_magic_damaged(src, out) -> Damage:
    """Only the 16-byte magic string overwritten: SQLite refuses the file ("file is not a
    database"); every other header field and every page intact."""
    def patch(b):
        b[:16] = b"Hermes crashed!\x00"
    return _header_case("header_magic_damaged", src, out, "magic string overwritten", patch,
                        ["magic"])


def header_page_size_damaged(src, out) -> Damage:
    """The page size field (offset 16) set to 3000, not a power of two."""
    def patch(b):
        struct.pack_into(">H", b, 16, 3000)
    return _header_case("header_page_size_damaged", src, out, "page size field set to 3000",
                        patch, ["page_size"])


def header_freelist_damaged(src, out) -> Damage:
    """The freelist trunk pointer and count (offsets 32, 36) set past the end of the file;
    the store has deleted sessions and messages on its free pages."""
    def patch(b):
        struct.pack_into(">II", b, 32, 0x7FFFFF00, 0x7FFFFFF0)
    d = _header_case("header_freelist_damaged", src, out,
                     "freelist trunk and count set past the end of the file", patch,
                     ["freelist_trunk", "freelist_count"])
    d.expect_verdict = "structural_corruption"       # the file opens; its freelist is broken
    d.expect_errors_in = d.deep_errors_in = {"(freelist)"}
    return d


def header_zeroed_alone(src, out) -> Damage:
    """The whole 100-byte header zeroed and no schema given: page size, freelist and the
    rest inferred from the pages."""
    def patch(b):
        b[:100] = bytes(100)
    return _header_case("header_zeroed_alone", src, out, "bytes 0..99 zeroed, no schema_from",
                        patch, ["magic", "page_size", "file_format_versions", "payload_fractions",
                                "freelist_trunk", "freelist_count", "schema_format",
                                "text_encoding"])


def overflow_chains_damaged(src, out) -> Damage:
    """Three messages rows with overflow chains of two or more pages: row A's last overflow
    page zeroed (its text now ends in NULs: it still decodes), row B's last overflow page made
    to point on to another page (the chain is longer than the payload: its bytes are intact),
    row C's chain cut after its first page (it cannot be read: lost). ``extra``: the rowids;
    A's and B's rows must come back flagged as suspect, never as a complete salvage."""
    src, out, gt = _start("overflow_chains_damaged", src, out)
    root = pagefile.root_pages(src)["messages"]
    picked = []
    with PageFile(out, writable=True) as pf:
        for _pg, _page, cells in _leaf_with_cells(pf, root):
            for c in cells:
                if c.overflow is not None and len(pf.overflow_chain(c.overflow)) >= 2:
                    picked.append((c.rowid, pf.overflow_chain(c.overflow)))
        a, b, cc = picked[len(picked) // 4], picked[len(picked) // 2], picked[3 * len(picked) // 4]
        pf.write_page(a[1][-1], bytes(pf.page_size))
        last = bytearray(pf.read_page(b[1][-1]))
        struct.pack_into(">I", last, 0, cc[1][-1])
        pf.write_page(b[1][-1], bytes(last))
        first = bytearray(pf.read_page(cc[1][0]))
        struct.pack_into(">I", first, 0, 0)
        pf.write_page(cc[1][0], bytes(first))
    con = sqlite3.connect(f"file:{out}?mode=ro", uri=True)
    con.text_factory = bytes
    row = con.execute("SELECT * FROM messages NOT INDEXED WHERE rowid = ?", (a[0],)).fetchone()
    con.close()
    cols = gt["tables"]["messages"]["columns"]
    was = gt["tables"]["messages"]["rows"][a[0]]
    # every column the zeroed page reached (text read back as bytes)
    changed = [(c, v) for c, v, w in zip(cols, row, (a[0],) + tuple(was[1:]))
               if (v.decode("utf-8", "replace") if isinstance(v, bytes) else v) != w]
    d = Damage("overflow_chains_damaged",
               f"messages {a[0]}: last overflow page {a[1][-1]} zeroed; {b[0]}: chain points on "
               f"past its end; {cc[0]}: chain cut after page {cc[1][0]}", "structural_corruption",
               expect_errors_in={"messages"}, deep_errors_in={"messages"},
               lost_rows={"messages": {cc[0]}},
               pages=[a[1][-1], b[1][-1], cc[1][0]],
               extra={"zeroed_tail": a[0], "chain_too_long": b[0], "chain_cut": cc[0],
                      "altered": [("messages", a[0], c, v) for c, v in changed]})
    return _base(d, src, out, gt)


def wal_stale_frames(src, out) -> Damage:
    """No damage: a live WAL image (real SessionDB) whose committed frames are followed by
    stale frames of an earlier WAL generation, as every WAL restart leaves them. SQLite reads
    the valid frames and ignores the stale ones; so must a salvage, without calling it torn.
    Ground truth: SQLite's own reading of the image."""
    src, out = Path(src), Path(out)
    meta = build.with_stale_wal(src, out)
    gt = truth.ground_truth(out)
    d = Damage("wal_stale_frames", "live WAL: committed frames, then stale frames of an earlier generation",
               "healthy", path=str(out), truth_path=str(out), extra={"wal_meta": meta})
    main_only = truth.ground_truth(out, ignore_wal=True)
    d.extra["wal_only_rows"] = {t: set(v["rows"]) - set(main_only["tables"].get(t, {"rows": {}})["rows"])
                                for t, v in gt["tables"].items()}
    d.expected_rows = truth.rowids(gt)
    d.deleted_on_freelist = {}
    return d


def sessions_leaf_lost_write(src, out) -> Damage:
    """A lost write: a sessions leaf reverted to an older, well-formed version of itself.

    The older version is the real page of an earlier state of the same store (src); the store
    then went on with the real SessionDB: one session of that leaf deleted, two resumed and
    titled, so the leaf was rewritten in place (same page number, same tree). The damage puts
    the earlier bytes of that one page back into the later file; every index (and every
    other page) holds the later state. ``extra["stale"]``: the two rows whose content reads
    as the earlier one; ``deleted_in_file``: the deleted session, readable on the stale leaf.
    """
    src = Path(src)
    out = Path(out)
    root = pagefile.root_pages(src)["sessions"]
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        with PageFile(src) as pf:
            _, leaves = pf.walk(root)
            full = [pg for pg in leaves if len(pf.cells(pf.parse_page(pg))) >= 3
                    and not any(c.overflow for c in pf.cells(pf.parse_page(pg)))]
            leaf = full[len(full) // 2]
            old_page = pf.read_page(leaf)
            rowids = [c.rowid for c in pf.cells(pf.parse_page(leaf))]
        rows = [con.execute("SELECT rowid, id, title, length(system_prompt), (SELECT count(*) "
                            "FROM sessions c WHERE c.parent_session_id = s.id) FROM sessions s "
                            "NOT INDEXED WHERE rowid = ?", (r,)).fetchone() for r in rowids]
    finally:
        con.close()
    untitled = [r for r in rows if r[2] is None] or rows
    a = untitled[0]
    victim = max((r for r in rows if r is not a and not r[4]), key=lambda r: r[3] or 0)
    b = next(r for r in rows if r is not a and r is not victim)
    retitle = {a[1]: "Resumed After The Copy #%d" % a[0], b[1]: "Renamed Later #%d" % b[0]}
    ref = out.parent / "truth" / "state.db"
    meta = build.later_state(src, ref, victim[1], retitle)
    build.copy_image(ref, out)
    with PageFile(out, writable=True) as pf:
        page = pf.parse_page(leaf)
        now = [c.rowid for c in pf.cells(page)] if page.is_leaf and page.is_table else None
        if now != [r for r in rowids if r != victim[0]]:
            raise RuntimeError(f"sessions leaf {leaf} was not rewritten in place ({now})")
        pf.write_page(leaf, old_page)
    gt = truth.ground_truth(ref)
    cols = gt["tables"]["sessions"]["columns"]
    stale = {}
    con = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    try:
        for r in (a, b):
            was = con.execute("SELECT * FROM sessions NOT INDEXED WHERE rowid = ?", (r[0],)).fetchone()
            stale[r[0]] = [(c, v) for c, v, w in zip(cols, was, gt["tables"]["sessions"]["rows"][r[0]])
                           if v != w]
    finally:
        con.close()
    d = Damage("sessions_leaf_lost_write",
               f"sessions leaf {leaf} holds its bytes from before session {victim[0]} was deleted "
               f"and sessions {a[0]}, {b[0]} were titled", "structural_corruption",
               truth_path=str(ref), pages=[leaf], expect_errors_in=set(),
               deep_errors_in={n for n, _p, _c in _indexes_of(ref, "sessions")},
               extra={"stale": {r: dict(v) for r, v in stale.items()}, "leaf": leaf,
                      "altered": [("sessions", r, c, v) for r, vs in stale.items() for c, v in vs],
                      "later": meta})
    d.deleted_in_file = {"sessions": {victim[0]}}
    d.deleted_on_freelist = deleted_on_freelist_rows(ref, gt)
    return _base(d, ref, out, gt)


def interior_child_pointer_bit_flipped(src, out, bit: int = 0) -> Damage:
    """One bit flipped in a child pointer of an interior page: the lowest bit (``bit``) of
    the right-most child pointer (page header offset 8) of the sessions root, so it names the
    page next to its leaf. That leaf is orphaned, intact (``unreachable``); SQLite's walk
    of sessions reads the page now named (whatever it is) in its place. A perfect salvage
    returns every row once, as it was, and no row of the page now named."""
    src, out, gt = _start("interior_child_pointer_bit_flipped", src, out)
    root = pagefile.root_pages(src)["sessions"]
    with PageFile(out, writable=True) as pf:
        page = pf.parse_page(root)
        if page.is_leaf:
            raise RuntimeError("sessions root is a leaf: no child pointer to flip")
        off = 8 + (100 if root == 1 else 0)
        data = bytearray(page.data)
        (was,) = struct.unpack_from(">I", data, off)
        if was != page.right_child:
            raise RuntimeError("right-most child pointer not at header offset 8")
        now = was ^ (1 << bit)
        struct.pack_into(">I", data, off, now)
        orphan_ids = {c.rowid for c in pf.cells(pf.parse_page(was))}
        pf.write_page(root, bytes(data))
    owners = pagefile.page_owners(src)
    d = Damage("interior_child_pointer_bit_flipped",
               f"sessions root {root}: right-most child pointer {was} -> {now} (bit {bit} flipped); "
               f"leaf {was} orphaned, page {now} ({owners.get(now)}) read in its place",
               "structural_corruption", unreachable={"sessions": orphan_ids}, pages=[root],
               expect_errors_in={"sessions"},
               deep_errors_in={"sessions"} | {n for n, _p, _c in _indexes_of(src, "sessions")},
               extra={"orphaned": was, "now_named": now, "now_named_owner": owners.get(now)})
    return _base(d, src, out, gt)


ALL_CASES: Dict[str, Callable[..., Damage]] = {f.__name__: f for f in (
    healthy, fts_pages_overwritten, fts_doclist_bit_flipped, session_duplicated_behind_title_index, unique_index_emptied,
    not_null_nulled, interior_page_zeroed, page1_damaged, schema_page_damaged, zero_length,
    not_sqlite, missing, garbage_huge_rowid, garbage_leaf_pages, page_referenced_twice,
    torn_wal, deleted_on_freelist, freelist_trunk_pointer_damaged, freelist_trunk_page_damaged,
    truncated_copy, header_zeroed, interior_points_at_foreign_leaf, schema_page_lost,
    invalid_utf8_in_rows, header_magic_damaged, header_page_size_damaged, header_freelist_damaged,
    header_zeroed_alone, overflow_chains_damaged, wal_stale_frames, sessions_leaf_lost_write,
    interior_child_pointer_bit_flipped)}


def make(name: str, src, out) -> Damage:
    return ALL_CASES[name](src, out)
