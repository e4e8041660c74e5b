"""A damaged file header whose page size and pages can be inferred is salvaged, and the
report says which header fields were inferred."""
import sqlite3

import pytest

from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.header import infer_header, parse_header

HEADER_CASES = ["header_magic_damaged", "header_page_size_damaged", "header_freelist_damaged",
                "header_zeroed_alone"]


@pytest.mark.parametrize("name", HEADER_CASES)
def test_header_inferred_and_named(salvaged, name):
    r = salvaged(name)
    assert r.err is None
    assert r.rep["header_inferred"] == r.d.extra["inferred"]
    assert r.rep["verdict"] == "complete" and r.rep["loss_rows"] == 0
    assert r.rep["held_back"]["rows"] == 0
    assert r.rep["freelist"]["evidence"]["complete"]


@pytest.mark.parametrize("page_size", [512, 1024, 8192, 65536])
def test_page_size_inferred_from_pages(tmp_path, page_size):
    p = tmp_path / "x.db"
    c = sqlite3.connect(p)
    c.execute("PRAGMA page_size=%d" % page_size)
    c.execute("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT)")
    c.execute("CREATE INDEX tb ON t(b)")
    c.executemany("INSERT INTO t(b) VALUES (?)", [("row %d " % i * 20,) for i in range(3000)])
    c.commit()
    c.close()
    data = bytearray(p.read_bytes())
    good = bytes(data[:100])
    data[:100] = bytes(100)
    hdr, fields = infer_header(bytes(data))
    assert parse_header(hdr).page_size == page_size
    assert hdr[16:18] == good[16:18] and "page_size" in fields
    data[:100] = hdr
    p.write_bytes(bytes(data))
    c = sqlite3.connect("file:%s?mode=ro" % p, uri=True)
    assert c.execute("SELECT count(*) FROM t NOT INDEXED").fetchone()[0] == 3000
    c.close()


def test_no_page_size_fits_text():
    text = "".join("2026-09-07 17:05:%02d WARNING gateway.session: save failed\n" % (i % 60)
                   for i in range(3000)).encode()
    with pytest.raises(FormatError):
        infer_header(text)
