"""Property tests of the pure-Python SQLite reader against real SQLite files."""
import os
import random
import sqlite3
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fleetops.remote.sqlite.fileformat.btree import TABLE_INTERIOR
from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.header import HEADER_MAGIC
from fleetops.remote.sqlite.fileformat.reader import SQLiteFile
from fleetops.remote.sqlite.fileformat.record import decode_record, encode_varint, read_varint
from fleetops.remote.sqlite.fileformat.wal import apply_wal

INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


# ---------------------------------------------------------------- varints

@given(INT64)
def test_varint_round_trip(v):
    enc = encode_varint(v)
    assert 1 <= len(enc) <= 9
    assert read_varint(enc + b"\xff\xff", 0) == (v, len(enc))


@pytest.mark.parametrize("v,n", [(0, 1), (127, 1), (128, 2), (16383, 2), (16384, 3),
                                 ((1 << 56) - 1, 8), (1 << 56, 9), (-1, 9),
                                 ((1 << 63) - 1, 9), (-(1 << 63), 9)])
def test_varint_lengths_and_nine_byte_form(v, n):
    enc = encode_varint(v)
    assert len(enc) == n
    if n == 9:
        assert all(b & 0x80 for b in enc[:8])  # the 9th byte carries 8 full bits
    assert read_varint(enc, 0)[0] == v


@given(st.binary(max_size=12), st.integers(min_value=0, max_value=14))
def test_varint_garbage_only_formaterror(buf, off):
    try:
        read_varint(buf, off)
    except FormatError:
        pass


# ---------------------------------------------------------------- records vs real SQLite

VALUES = st.one_of(
    st.none(), INT64, st.integers(min_value=-300, max_value=300),
    st.floats(allow_nan=False), st.text(max_size=60), st.binary(max_size=60),
    st.sampled_from([0, 1]))


def _db_rows(path, rows, page_size=1024, encoding=None, ncols=4):
    if os.path.exists(path):
        os.unlink(path)
    c = sqlite3.connect(path)
    c.execute("PRAGMA page_size=%d" % page_size)
    if encoding:
        c.execute("PRAGMA encoding='%s'" % encoding)
    c.execute("CREATE TABLE t(%s)" % ", ".join("c%d" % i for i in range(ncols)))
    c.executemany("INSERT INTO t VALUES (%s)" % ",".join("?" * ncols), rows)
    c.commit()
    expected = dict((r[0], list(r[1:])) for r in c.execute("SELECT rowid, * FROM t"))
    root = c.execute("SELECT rootpage FROM sqlite_schema WHERE name='t'").fetchone()[0]
    c.close()
    return expected, root


def _read_table(path, root):
    with SQLiteFile(path) as f:
        w = f.walk_btree(root)
        assert not w.bad_pages and not w.double_refs
        got = {}
        for pg in w.leaves:
            for cell, vals in f.leaf_records(pg):
                assert vals is not None, cell.error
                got[cell.rowid] = vals
    return got


@SETTINGS
@given(rows=st.lists(st.tuples(VALUES, VALUES, VALUES, VALUES), min_size=1, max_size=40),
       page_size=st.sampled_from([512, 1024, 4096, 65536]),
       encoding=st.sampled_from([None, "UTF-16le", "UTF-16be"]))
def test_records_match_sqlite(tmp_path, rows, page_size, encoding):
    path = str(tmp_path / "r.db")
    expected, root = _db_rows(path, rows, page_size, encoding)
    assert _read_table(path, root) == expected
    with SQLiteFile(path) as f:
        assert f.page_size == page_size
        assert f.encoding == {None: "utf-8", "UTF-16le": "utf-16-le",
                              "UTF-16be": "utf-16-be"}[encoding]


@SETTINGS
@given(sizes=st.lists(st.integers(min_value=0, max_value=150000), min_size=1, max_size=6),
       page_size=st.sampled_from([512, 1024, 4096]), text=st.booleans(), seed=st.integers(0, 99))
def test_overflow_chains_match_sqlite(tmp_path, sizes, page_size, text, seed):
    rng = random.Random(seed)
    rows = []
    for n in sizes:
        v = ("".join(rng.choice("abcé日🚀 ") for _ in range(n // 3)) if text
             else bytes(rng.getrandbits(8) for _ in range(n)))
        rows.append((v, n, None, b"x" * (n % 7)))
    path = str(tmp_path / "o.db")
    expected, root = _db_rows(path, rows, page_size)
    assert _read_table(path, root) == expected


def test_local_payload_formula_against_dbstat(tmp_path):
    """Payloads of every size around the overflow threshold: our local size must leave
    exactly as many overflow pages as SQLite's dbstat counts."""
    path = str(tmp_path / "p.db")
    rows = [(b"x" * n,) for n in range(1, 3000, 7)]
    _db_rows(path, [r + (None, None, None) for r in rows], 1024)
    c = sqlite3.connect(path)
    n_over = c.execute("SELECT count(*) FROM dbstat WHERE name='t' AND pagetype='overflow'"
                       ).fetchone()[0]
    c.close()
    with SQLiteFile(path) as f:
        w = f.walk_btree(f.schema_rows()[0]["rootpage"])
        assert len(w.overflow) == n_over > 0


def test_index_overflow_pages_against_dbstat(tmp_path):
    """The same for an index b-tree (its own local-size rule), leaf and interior pages: every
    overflow page reached, none invented (the walk skips cells that cannot overflow)."""
    path = str(tmp_path / "i.db")
    c = sqlite3.connect(path)
    c.execute("PRAGMA page_size=1024")
    c.execute("CREATE TABLE t(v)")
    c.execute("CREATE INDEX i ON t(v)")
    c.executemany("INSERT INTO t VALUES (?)", [(bytes([n % 251]) * n,) for n in range(1, 3000, 7)])
    c.commit()
    n_over = c.execute("SELECT count(*) FROM dbstat WHERE name='i' AND pagetype='overflow'"
                       ).fetchone()[0]
    root = c.execute("SELECT rootpage FROM sqlite_master WHERE name='i'").fetchone()[0]
    c.close()
    with SQLiteFile(path) as f:
        w = f.walk_btree(root)
        assert len(w.overflow) == n_over > 0
        assert not w.bad_pages and not w.bad_cells


def test_reserved_bytes(tmp_path):
    """A file with reserved bytes per page (as encryption/checksum VFSes leave) still decodes."""
    path = str(tmp_path / "res.db")
    c = sqlite3.connect(path)
    c.execute("PRAGMA page_size=1024")
    c.execute("VACUUM")
    c.close()
    with open(path, "r+b") as fh:       # empty db: set 32 reserved bytes, fix page 1's content start
        fh.seek(20)
        fh.write(bytes([32]))
        fh.seek(100 + 5)
        fh.write(struct.pack(">H", 1024 - 32))
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE t(a, b)")
    c.executemany("INSERT INTO t VALUES (?, ?)", [(i, "v" * (i * 13)) for i in range(200)])
    c.commit()
    assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    expected = dict((r[0], list(r[1:])) for r in c.execute("SELECT rowid, * FROM t"))
    root = c.execute("SELECT rootpage FROM sqlite_schema WHERE name='t'").fetchone()[0]
    c.close()
    with SQLiteFile(path) as f:
        assert f.header.reserved == 32 and f.usable_size == 992
    assert _read_table(path, root) == expected


def test_freelist_and_classifier(tmp_path):
    path = str(tmp_path / "f.db")
    c = sqlite3.connect(path)
    c.execute("PRAGMA page_size=1024")
    c.execute("CREATE TABLE t(a)")
    c.execute("CREATE INDEX ti ON t(a)")
    c.executemany("INSERT INTO t VALUES (?)", [("x" * 300 + str(i),) for i in range(400)])
    c.commit()
    c.execute("DELETE FROM t WHERE rowid > 100")
    c.commit()
    fl_count = c.execute("PRAGMA freelist_count").fetchone()[0]
    stat = dict(((r[0]), (r[1], r[2])) for r in c.execute(
        "SELECT pageno, name, pagetype FROM dbstat"))
    c.close()
    with SQLiteFile(path) as f:
        fl = f.freelist()
        assert not fl["errors"]
        assert len(fl["trunks"]) + len(fl["leaves"]) == fl_count > 0
        cls = f.classify_pages()
    for pgno, (name, ptype) in stat.items():
        info = cls["pages"][pgno]
        assert info["owner"] == name, pgno
        want = {"internal": ("table-interior", "index-interior"), "leaf": ("table-leaf", "index-leaf"),
                "overflow": ("overflow",)}[ptype]
        assert info["kind"] in want
    kinds = [i["kind"] for p, i in cls["pages"].items() if p not in stat]
    assert sorted(set(kinds)) <= ["freelist-leaf", "freelist-trunk"]
    assert len(kinds) == fl_count


def test_walk_detects_cycle_and_double_reference(tmp_path):
    path = str(tmp_path / "c.db")
    c = sqlite3.connect(path)
    c.execute("PRAGMA page_size=512")
    c.execute("CREATE TABLE t(a)")
    c.executemany("INSERT INTO t VALUES (?)", [("y" * 100,) for _ in range(100)])
    c.commit()
    root = c.execute("SELECT rootpage FROM sqlite_schema").fetchone()[0]
    c.close()
    data = bytearray(open(path, "rb").read())
    f = SQLiteFile(data=bytes(data))
    page = f.btree_page(root)
    assert page.type == TABLE_INTERIOR and page.ncells >= 2
    kids = f.children(page)
    # second cell now points at the first cell's child; the right child points at the root
    off0 = (root - 1) * 512 + page.cell_pointers[1]
    struct.pack_into(">I", data, off0, kids[0])
    struct.pack_into(">I", data, (root - 1) * 512 + 8, root)
    f = SQLiteFile(data=bytes(data))
    w = f.walk_btree(root)
    refs = sorted(d["page"] for d in w.double_refs)
    assert refs == sorted([kids[0], root])
    assert kids[1] not in w.pages      # orphaned by the double reference


# ---------------------------------------------------------------- garbage robustness

@settings(max_examples=150, deadline=None)
@given(st.binary(min_size=0, max_size=300))
def test_record_garbage_only_formaterror(buf):
    try:
        decode_record(buf)
    except FormatError:
        pass


def _exercise(f):
    f.classify_pages()
    f.freelist()
    try:
        f.schema_rows()
    except FormatError:
        pass
    for pg in range(1, f.page_count + 1):
        try:
            list(f.leaf_records(pg))
        except FormatError:
            pass
        try:
            p = f.btree_page(pg)
            for i in range(p.ncells):
                try:
                    f.read_cell(p, i)
                except FormatError:
                    pass
        except FormatError:
            pass


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=0, max_size=3000), st.sampled_from([512, 1024]))
def test_random_file_only_formaterror(body, ps):
    head = bytearray(100)
    head[:16] = HEADER_MAGIC
    head[16:18] = struct.pack(">H", ps)
    try:
        f = SQLiteFile(data=bytes(head) + body)
    except FormatError:
        return
    _exercise(f)


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("g") / "g.db")
    c = sqlite3.connect(path)
    c.execute("PRAGMA page_size=512")
    c.execute("CREATE TABLE t(a, b)")
    c.execute("CREATE INDEX tb ON t(b)")
    c.executemany("INSERT INTO t VALUES (?, ?)", [(i, "z" * (i % 700)) for i in range(120)])
    c.commit()
    c.close()
    return open(path, "rb").read()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1,
                      max_size=40))
def test_mutated_real_file_only_formaterror(small_db, flips):
    data = bytearray(small_db)
    for pos, b in flips:
        data[pos % len(data)] = b
    try:
        f = SQLiteFile(data=bytes(data))
    except FormatError:
        return
    _exercise(f)


# ---------------------------------------------------------------- WAL

def _wal_image(tmp_path):
    path = str(tmp_path / "w.db")
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute("CREATE TABLE t(a)")
    c.commit()
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for i in range(5):
        c.executemany("INSERT INTO t VALUES (?)", [("txn%d-%d" % (i, j) * 20,) for j in range(30)])
        c.commit()
    snap = tmp_path / "snap"
    snap.mkdir()
    for s in ("", "-wal"):
        with open(path + s, "rb") as a, open(str(snap / "w.db") + s, "wb") as b:
            b.write(a.read())
    c.close()
    return str(snap / "w.db")


def _sqlite_view(path):
    c = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        return sorted(r[0] for r in c.execute("SELECT a FROM t"))
    finally:
        c.close()


def _apply_and_read(path):
    img = path + ".img"
    with open(path, "rb") as a, open(img, "wb") as b:
        b.write(a.read())
    summary = apply_wal(img, path + "-wal")
    c = sqlite3.connect("file:%s?mode=ro&immutable=1" % img, uri=True)
    try:
        return sorted(r[0] for r in c.execute("SELECT a FROM t")), summary
    finally:
        c.close()


def test_wal_replay_equals_sqlite(tmp_path):
    path = _wal_image(tmp_path)
    got, summary = _apply_and_read(path)
    assert len(got) == 150 and not summary["torn"]
    tmp2 = tmp_path / "ref"
    tmp2.mkdir()
    for s in ("", "-wal"):
        with open(path + s, "rb") as a, open(str(tmp2 / "w.db") + s, "wb") as b:
            b.write(a.read())
    assert got == _sqlite_view(str(tmp2 / "w.db"))


@pytest.mark.parametrize("how", ["truncate", "checksum"])
def test_torn_wal_ignores_last_transaction_like_sqlite(tmp_path, how):
    path = _wal_image(tmp_path)
    wal = path + "-wal"
    size = os.path.getsize(wal)
    if how == "truncate":
        with open(wal, "r+b") as fh:
            fh.truncate(size - 300)
    else:
        with open(wal, "r+b") as fh:
            fh.seek(size - 100)
            fh.write(b"\x55" * 10)
    got, summary = _apply_and_read(path)
    assert summary["torn"]
    assert len(got) == 120          # the fifth transaction is gone, the first four stay
    ref = tmp_path / "ref"
    ref.mkdir()
    for s in ("", "-wal"):
        with open(path + s, "rb") as a, open(str(ref / "w.db") + s, "wb") as b:
            b.write(a.read())
    assert got == _sqlite_view(str(ref / "w.db"))
