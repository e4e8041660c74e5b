"""Minimal, independent reader/writer of the SQLite file format for the test corpus.

Why this exists: the corpus must damage databases at the byte level and state exactly
which rows sit on which pages, without trusting the code under test
(fleetops.remote.sqlite.fileformat). So this is a second, deliberately small implementation
written from https://www.sqlite.org/fileformat2.html. Stdlib only.
"""
from __future__ import annotations

import sqlite3
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

MAGIC = b"SQLite format 3\x00"

# b-tree page types (first byte of the b-tree page header)
INTERIOR_INDEX = 2
INTERIOR_TABLE = 5
LEAF_INDEX = 10
LEAF_TABLE = 13
PAGE_TYPES = (INTERIOR_INDEX, INTERIOR_TABLE, LEAF_INDEX, LEAF_TABLE)


# ---------------------------------------------------------------- varints / records

def read_varint(buf: bytes, off: int) -> Tuple[int, int]:
    """Decode a SQLite varint at ``off``; return (value, bytes used). Big-endian, 1..9 bytes."""
    value = 0
    for i in range(8):
        b = buf[off + i]
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            return value, i + 1
    value = (value << 8) | buf[off + 8]
    if value >= 1 << 63:  # rowids are signed 64-bit
        value -= 1 << 64
    return value, 9


def encode_varint(value: int) -> bytes:
    """Encode ``value`` as a SQLite varint (negative numbers as 9-byte two's complement)."""
    if value < 0:
        value += 1 << 64
    if value > 0x00FFFFFFFFFFFFFF:
        out = [value & 0xFF]
        value >>= 8
        for _ in range(8):
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        return bytes(reversed(out))
    out = [value & 0x7F]
    value >>= 7
    while value:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(reversed(out))


def serial_size(st: int) -> int:
    """Bytes in the record body used by serial type ``st``."""
    if st < 12:
        return (0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0)[st]
    return (st - 12) // 2 if st % 2 == 0 else (st - 13) // 2


def decode_record(payload: bytes) -> List[object]:
    """Decode a complete record (header + body) into Python values (text as UTF-8)."""
    hdr_len, n = read_varint(payload, 0)
    types = []
    off = n
    while off < hdr_len:
        st, k = read_varint(payload, off)
        types.append(st)
        off += k
    values: List[object] = []
    body = hdr_len
    for st in types:
        size = serial_size(st)
        raw = payload[body:body + size]
        if len(raw) != size:
            raise ValueError("record body shorter than its header says")
        if st == 0:
            v = None
        elif 1 <= st <= 6:
            v = int.from_bytes(raw, "big", signed=True)
        elif st == 7:
            v = struct.unpack(">d", raw)[0]
        elif st == 8:
            v = 0
        elif st == 9:
            v = 1
        elif st >= 12 and st % 2 == 0:
            v = bytes(raw)
        elif st >= 13:
            v = raw.decode("utf-8", "replace")
        else:
            raise ValueError(f"reserved serial type {st}")
        values.append(v)
        body += size
    return values


def record_header(payload: bytes) -> Tuple[int, int, List[Tuple[int, int]]]:
    """Return (header length, header-length varint size, [(serial type, offset in payload)])."""
    hdr_len, n = read_varint(payload, 0)
    out = []
    off = n
    while off < hdr_len:
        st, k = read_varint(payload, off)
        out.append((st, off))
        off += k
    return hdr_len, n, out


# ---------------------------------------------------------------- pages and cells

@dataclass
class Cell:
    """One parsed b-tree cell. ``payload`` is the local part only; ``overflow`` the first overflow page."""
    offset: int
    size: int               # bytes the cell occupies on the page
    left_child: Optional[int] = None
    rowid: Optional[int] = None
    payload_len: Optional[int] = None
    payload: bytes = b""
    overflow: Optional[int] = None


@dataclass
class BTreePage:
    """A parsed b-tree page. ``hdr`` is the offset of the b-tree header (100 on page 1)."""
    pgno: int
    data: bytes
    hdr: int
    type: int
    first_freeblock: int
    ncells: int
    content_start: int
    fragmented: int
    right_child: Optional[int]
    cell_pointers: List[int] = field(default_factory=list)

    @property
    def is_leaf(self) -> bool:
        return self.type in (LEAF_TABLE, LEAF_INDEX)

    @property
    def is_table(self) -> bool:
        return self.type in (LEAF_TABLE, INTERIOR_TABLE)

    @property
    def header_size(self) -> int:
        return 8 if self.is_leaf else 12

    @property
    def pointer_array_end(self) -> int:
        return self.hdr + self.header_size + 2 * self.ncells


class PageFile:
    """Random access to the pages of one database file (the main file only, never the WAL)."""

    def __init__(self, path, writable: bool = False):
        self.path = Path(path)
        self._f = open(self.path, "r+b" if writable else "rb")
        self.header = self._f.read(100)
        if len(self.header) < 100 or not self.header.startswith(MAGIC):
            raise ValueError(f"{self.path}: not a SQLite database header")
        ps = struct.unpack(">H", self.header[16:18])[0]
        self.page_size = 65536 if ps == 1 else ps
        self.reserved = self.header[20]
        self.usable = self.page_size - self.reserved
        self.header_page_count = struct.unpack(">I", self.header[28:32])[0]
        self.freelist_trunk = struct.unpack(">I", self.header[32:36])[0]
        self.freelist_count = struct.unpack(">I", self.header[36:40])[0]
        self.text_encoding = struct.unpack(">I", self.header[56:60])[0]

    # context manager sugar
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._f.close()

    @property
    def page_count(self) -> int:
        """Pages actually in the file (the header's count can be stale for legacy writers)."""
        self._f.seek(0, 2)
        return self._f.tell() // self.page_size

    def read_page(self, pgno: int) -> bytes:
        if not 1 <= pgno <= self.page_count:
            raise ValueError(f"page {pgno} out of range 1..{self.page_count}")
        self._f.seek((pgno - 1) * self.page_size)
        return self._f.read(self.page_size)

    def write_page(self, pgno: int, data: bytes) -> None:
        if len(data) != self.page_size:
            raise ValueError("page image has the wrong size")
        self._f.seek((pgno - 1) * self.page_size)
        self._f.write(data)
        self._f.flush()

    def write_header_field(self, offset: int, fmt: str, value) -> None:
        """Patch one big-endian field of the 100-byte database header."""
        page1 = bytearray(self.read_page(1))
        struct.pack_into(fmt, page1, offset, value)
        self.write_page(1, bytes(page1))
        self.header = bytes(page1[:100])

    # ------------------------------------------------------------ b-tree pages

    def parse_page(self, pgno: int, data: Optional[bytes] = None) -> BTreePage:
        """Parse the b-tree header and cell pointer array; raise ValueError if it is not a b-tree page."""
        data = self.read_page(pgno) if data is None else data
        hdr = 100 if pgno == 1 else 0
        ptype = data[hdr]
        if ptype not in PAGE_TYPES:
            raise ValueError(f"page {pgno}: not a b-tree page (type byte {ptype})")
        first_fb, ncells, cstart = struct.unpack(">HHH", data[hdr + 1:hdr + 7])
        cstart = 65536 if cstart == 0 else cstart
        frag = data[hdr + 7]
        right = None
        hsize = 8
        if ptype in (INTERIOR_INDEX, INTERIOR_TABLE):
            right = struct.unpack(">I", data[hdr + 8:hdr + 12])[0]
            hsize = 12
        base = hdr + hsize
        if base + 2 * ncells > len(data):
            raise ValueError(f"page {pgno}: cell count {ncells} overruns the page")
        ptrs = list(struct.unpack(f">{ncells}H", data[base:base + 2 * ncells]))
        return BTreePage(pgno, data, hdr, ptype, first_fb, ncells, cstart, frag, right, ptrs)

    def _local_payload(self, total: int, is_table_leaf: bool) -> int:
        """Bytes of a payload of ``total`` bytes stored on the b-tree page itself."""
        u = self.usable
        x = u - 35 if is_table_leaf else ((u - 12) * 64 // 255) - 23
        if total <= x:
            return total
        m = ((u - 12) * 32 // 255) - 23
        k = m + ((total - m) % (u - 4))
        return k if k <= x else m

    def parse_cell(self, page: BTreePage, offset: int) -> Cell:
        """Parse the cell at ``offset`` of ``page`` (all four page types)."""
        d = page.data
        pos = offset
        cell = Cell(offset=offset, size=0)
        if page.type == INTERIOR_TABLE:
            cell.left_child = struct.unpack(">I", d[pos:pos + 4])[0]
            cell.rowid, n = read_varint(d, pos + 4)
            cell.size = 4 + n
            return cell
        if page.type == INTERIOR_INDEX:
            cell.left_child = struct.unpack(">I", d[pos:pos + 4])[0]
            pos += 4
        plen, n = read_varint(d, pos)
        pos += n
        cell.payload_len = plen
        if page.type == LEAF_TABLE:
            cell.rowid, n = read_varint(d, pos)
            pos += n
        local = self._local_payload(plen, page.type == LEAF_TABLE)
        cell.payload = bytes(d[pos:pos + local])
        pos += local
        if local < plen:
            cell.overflow = struct.unpack(">I", d[pos:pos + 4])[0]
            pos += 4
        cell.size = pos - offset
        return cell

    def cells(self, page: BTreePage) -> List[Cell]:
        return [self.parse_cell(page, off) for off in page.cell_pointers]

    def overflow_chain(self, first: Optional[int]) -> List[int]:
        """Page numbers of an overflow chain (first 4 bytes of each page link to the next)."""
        chain = []
        seen = set()
        while first:
            if first in seen or not 1 <= first <= self.page_count:
                raise ValueError(f"bad overflow chain at page {first}")
            seen.add(first)
            chain.append(first)
            first = struct.unpack(">I", self.read_page(first)[:4])[0]
        return chain

    def full_payload(self, cell: Cell) -> bytes:
        """Local payload plus its overflow pages, cut to the declared payload length."""
        if cell.overflow is None:
            return cell.payload
        out = bytearray(cell.payload)
        for pg in self.overflow_chain(cell.overflow):
            out += self.read_page(pg)[4:self.usable]
        return bytes(out[:cell.payload_len])

    def walk(self, root: int) -> Tuple[List[int], List[int]]:
        """Walk a b-tree from ``root``: (interior pages, leaf pages), both in key order."""
        interior: List[int] = []
        leaves: List[int] = []

        def visit(pgno: int) -> None:
            page = self.parse_page(pgno)
            if page.is_leaf:
                leaves.append(pgno)
                return
            interior.append(pgno)
            for c in self.cells(page):
                visit(c.left_child)
            visit(page.right_child)

        visit(root)
        return interior, leaves

    def tree_pages(self, root: int) -> List[int]:
        """Every page a b-tree owns: interior, leaf and overflow pages."""
        interior, leaves = self.walk(root)
        pages = list(interior) + list(leaves)
        for pg in interior + leaves:
            page = self.parse_page(pg)
            if page.type == INTERIOR_TABLE:
                continue
            for c in self.cells(page):
                pages.extend(self.overflow_chain(c.overflow))
        return pages

    def table_rows(self, root: int) -> Iterator[Tuple[int, int, List[object]]]:
        """Yield (leaf page, rowid, values) for every row of a rowid table, in b-tree order."""
        _, leaves = self.walk(root)
        for pg in leaves:
            page = self.parse_page(pg)
            for c in self.cells(page):
                yield pg, c.rowid, decode_record(self.full_payload(c))

    def freelist(self) -> Tuple[List[int], List[int]]:
        """(trunk pages, leaf pages) of the freelist, following the trunk chain from the header."""
        trunks: List[int] = []
        leaves: List[int] = []
        trunk = self.freelist_trunk
        while trunk:
            if trunk in trunks:
                raise ValueError("freelist trunk loop")
            trunks.append(trunk)
            d = self.read_page(trunk)
            nxt, n = struct.unpack(">II", d[:8])
            leaves.extend(struct.unpack(f">{n}I", d[8:8 + 4 * n]))
            trunk = nxt
        return trunks, leaves

    def add_to_freelist(self, pages: List[int]) -> None:
        """Put ``pages`` on the freelist as one new trunk page (the first) plus leaves.

        Used to retire pages a damage case cut out of a tree so that quick_check does not
        also report them as "never used": the case stays about the damage it names.
        """
        if not pages:
            return
        trunk, rest = pages[0], list(pages[1:])
        if 8 + 4 * len(rest) > self.usable:
            raise ValueError("too many pages for one trunk")
        img = bytearray(self.page_size)
        struct.pack_into(">II", img, 0, self.freelist_trunk, len(rest))
        for i, pg in enumerate(rest):
            struct.pack_into(">I", img, 8 + 4 * i, pg)
        self.write_page(trunk, bytes(img))
        self.write_header_field(32, ">I", trunk)
        self.write_header_field(36, ">I", self.freelist_count + len(pages))
        self.freelist_trunk = trunk
        self.freelist_count += len(pages)

    def build_page(self, page: BTreePage, cell_images: List[bytes],
                   right_child: Optional[int] = None) -> bytes:
        """Return a defragmented image of ``page`` holding exactly ``cell_images`` in that order.

        The result is what SQLite itself writes after a defragment: header, pointer array,
        cells packed against the end of the usable area, no freeblocks, no fragments.
        Bytes before the b-tree header (the 100-byte file header on page 1) and the reserved
        area at the end are kept.
        """
        img = bytearray(page.data)
        hsize = page.header_size
        ptr_end = page.hdr + hsize + 2 * len(cell_images)
        top = self.usable
        offsets = []
        for c in cell_images:
            top -= len(c)
            offsets.append(top)
        if top < ptr_end:
            raise ValueError(f"page {page.pgno}: cells do not fit")
        img[page.hdr + hsize:self.usable] = bytes(self.usable - page.hdr - hsize)
        for off, c in zip(offsets, cell_images):
            img[off:off + len(c)] = c
        struct.pack_into(">BHHHB", img, page.hdr, page.type, 0, len(cell_images),
                         0 if top == 65536 else top, 0)
        if hsize == 12:
            struct.pack_into(">I", img, page.hdr + 8,
                             page.right_child if right_child is None else right_child)
        for i, off in enumerate(offsets):
            struct.pack_into(">H", img, page.hdr + hsize + 2 * i, off)
        return bytes(img)

    def cell_image(self, page: BTreePage, cell: Cell) -> bytes:
        return bytes(page.data[cell.offset:cell.offset + cell.size])


def table_leaf_cell(rowid: int, payload: bytes, overflow: Optional[int] = None) -> bytes:
    """Serialize a table-leaf cell whose payload fits locally (or whose local part is given)."""
    out = encode_varint(len(payload)) + encode_varint(rowid) + payload
    if overflow is not None:
        raise NotImplementedError("cells with overflow are re-encoded by hand")
    return out


# ---------------------------------------------------------------- schema helpers

def schema_objects(path) -> List[Tuple[str, str, str, int, Optional[str]]]:
    """(type, name, tbl_name, rootpage, sql) of every sqlite_schema row, read with stdlib sqlite3."""
    con = sqlite3.connect(f"file:{Path(path)}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in con.execute(
            "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_schema ORDER BY rowid")]
    finally:
        con.close()


def root_pages(path) -> Dict[str, int]:
    """Object name -> root page for every b-tree (tables and indexes; virtual tables have none)."""
    roots = {"sqlite_schema": 1}
    for _typ, name, _tbl, root, _sql in schema_objects(path):
        if root:
            roots[name] = root
    return roots


def page_owners(path) -> Dict[int, str]:
    """Page number -> owning object (b-tree and overflow pages), plus 'freelist' pages.

    Used by the tests to attribute integrity-check messages that only name a page.
    """
    owners: Dict[int, str] = {}
    roots = root_pages(path)
    with PageFile(path) as pf:
        for name, root in roots.items():
            for pg in pf.tree_pages(root):
                owners[pg] = name
        trunks, leaves = pf.freelist()
        for pg in trunks + leaves:
            owners[pg] = "freelist"
    return owners
