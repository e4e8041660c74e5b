"""Page-level, bounds-checked read access to one database image: pages, cells, overflow
chains, the freelist, tolerant b-tree walks and page classification."""
import mmap
import os
import struct

from fleetops.remote.sqlite.fileformat.btree import (
    BTREE_TYPES, INDEX_INTERIOR, PAGE_TYPE_NAMES, TABLE_INTERIOR, TABLE_LEAF, BTreePage,
    BTreeWalk, Cell, local_payload_size, ptrmap_shaped)
from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.header import parse_header
from fleetops.remote.sqlite.fileformat.record import decode_record, read_varint


class SQLiteFile(object):
    """Page-level read access to one database image (read-only, bounds-checked).

    Opens the file read-only and maps it, so nothing here can write the file. `overlay`
    ({page number: bytes}, read_wal's committed pages) is read in place of the file's pages,
    and `page_count` (the WAL's database size at its last commit) replaces the file's own.
    """

    def __init__(self, path=None, data=None, overlay=None, page_count=None):
        self._fh = None
        self._mm = None
        self.overlay = overlay or {}
        if data is not None:
            self.buf = data
        else:
            self._fh = open(path, "rb")
            size = os.fstat(self._fh.fileno()).st_size
            if size == 0:
                self.buf = b""
            else:
                self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
                self.buf = self._mm
        self.size = len(self.buf)
        self.header = parse_header(self.overlay[1][:100] if 1 in self.overlay else self.buf[:100])
        self.page_size = self.header.page_size
        self.usable_size = self.header.usable_size
        self.encoding = self.header.encoding
        # The file size is the truth; the header count is only a hint.
        self.page_count = page_count or max([self.size // self.page_size] + list(self.overlay))
        self.lock_byte_page = (0x40000000 // self.page_size) + 1

    def close(self):
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def page(self, pgno):
        """Raw bytes of page pgno (1-based); FormatError if out of the file."""
        if not isinstance(pgno, int) or pgno < 1 or pgno > self.page_count:
            raise FormatError("page %r outside 1..%d" % (pgno, self.page_count))
        if pgno in self.overlay:
            return self.overlay[pgno]
        start = (pgno - 1) * self.page_size
        if start + self.page_size > self.size:
            raise FormatError("page %d is past the end of the file" % pgno)
        return self.buf[start:start + self.page_size]

    def btree_page(self, pgno):
        """Parse the b-tree header and cell pointers of page pgno."""
        data = self.page(pgno)
        hoff = 100 if pgno == 1 else 0
        t = data[hoff]
        if t not in BTREE_TYPES:
            raise FormatError("page %d: not a b-tree page (type byte %d)" % (pgno, t))
        p = BTreePage()
        p.pgno = pgno
        p.type = t
        p.header_offset = hoff
        p.first_freeblock, p.ncells, cs, p.fragmented = struct.unpack(
            ">HHHB", data[hoff + 1:hoff + 8])
        p.content_start = 65536 if cs == 0 else cs
        hlen = 8 if p.is_leaf else 12
        p.right_child = None
        if not p.is_leaf:
            p.right_child = struct.unpack(">I", data[hoff + 8:hoff + 12])[0]
        ptr_start = hoff + hlen
        ptr_end = ptr_start + 2 * p.ncells
        if ptr_end > self.usable_size or (p.ncells and ptr_end > p.content_start):
            raise FormatError("page %d: %d cells do not fit" % (pgno, p.ncells))
        if p.content_start > self.usable_size and p.ncells:
            raise FormatError("page %d: cell content area starts past the page" % pgno)
        ptrs = struct.unpack(">%dH" % p.ncells, data[ptr_start:ptr_end])
        for ptr in ptrs:
            if ptr < ptr_end or ptr >= self.usable_size:
                raise FormatError("page %d: cell pointer %d out of range" % (pgno, ptr))
        p.cell_pointers = list(ptrs)
        return p

    def read_overflow(self, first, length, visited=None):
        """Follow an overflow chain for `length` bytes; returns (bytes, pages).

        Stops with FormatError on a loop, a page outside the file or a short chain.
        """
        out = bytearray()
        pages = []
        seen = set() if visited is None else visited
        pgno = first
        per_page = self.usable_size - 4
        while len(out) < length:
            if pgno in seen:
                raise FormatError("overflow chain loops at page %d" % pgno)
            if pgno == 0:
                raise FormatError("overflow chain ends %d bytes short" % (length - len(out)))
            seen.add(pgno)
            data = self.page(pgno)
            pages.append(pgno)
            nxt = struct.unpack(">I", data[:4])[0]
            take = min(per_page, length - len(out))
            out += data[4:4 + take]
            pgno = nxt
        return bytes(out), pages

    def read_cell(self, page, i, follow_overflow=True):
        """Decode cell i of a parsed page; FormatError on garbage."""
        if i < 0 or i >= len(page.cell_pointers):
            raise FormatError("cell %d not on page %d" % (i, page.pgno))
        data = self.page(page.pgno)
        off = page.cell_pointers[i]
        U = self.usable_size
        c = Cell(page.pgno, i)
        end_limit = U
        if page.type == TABLE_INTERIOR:
            if off + 4 > end_limit:
                raise FormatError("interior cell past page end")
            c.left_child = struct.unpack(">I", data[off:off + 4])[0]
            c.rowid, _ = read_varint(data[:end_limit], off + 4)
            return c
        if page.type == INDEX_INTERIOR:
            if off + 4 > end_limit:
                raise FormatError("interior cell past page end")
            c.left_child = struct.unpack(">I", data[off:off + 4])[0]
            off += 4
        c.payload_size, off = read_varint(data[:end_limit], off)
        if c.payload_size < 0 or c.payload_size > 0x7FFFFFFF:
            raise FormatError("payload size %d impossible" % c.payload_size)
        if page.type == TABLE_LEAF:
            c.rowid, off = read_varint(data[:end_limit], off)
        local = local_payload_size(c.payload_size, U, page.type == TABLE_LEAF)
        if off + local > end_limit:
            raise FormatError("cell payload runs past page end")
        if local == c.payload_size:
            c.payload = bytes(data[off:off + local])
            return c
        if off + local + 4 > end_limit:
            raise FormatError("overflow pointer past page end")
        head = bytes(data[off:off + local])
        first = struct.unpack(">I", data[off + local:off + local + 4])[0]
        c.overflow_pages = [first]
        if follow_overflow:
            rest, pages = self.read_overflow(first, c.payload_size - local)
            c.overflow_pages = pages
            c.payload = head + rest
            c.suspect = self._overflow_doubts(pages)
        return c

    def _overflow_doubts(self, pages):
        """What is wrong with an overflow chain that still gives the payload's bytes: a page
        of zeros (a zeroed or never-written page), or a last page that points on (the chain
        is longer than the payload size says)."""
        out = []
        for pgno in pages:
            if not any(self.page(pgno)):
                out.append("overflow page %d is all zeros" % pgno)
        last = struct.unpack(">I", self.page(pages[-1])[:4])[0]
        if last:
            out.append("overflow chain longer than the payload: its last page %d points on to "
                       "page %d" % (pages[-1], last))
        return out

    def children(self, page):
        """Child page numbers of an interior page, in key order (right child last)."""
        out = []
        for i in range(page.ncells):
            out.append(self.read_cell(page, i, follow_overflow=False).left_child)
        out.append(page.right_child)
        return out

    # ------------------------------------------------------------ freelist

    def freelist(self):
        """Walk the freelist: returns dict(trunks, leaves, errors) (loop/bounds safe)."""
        trunks, leaves, errors = [], [], []
        seen = set()
        pgno = self.header.freelist_trunk
        per_trunk = self.usable_size // 4 - 2
        # pages the header counts that lie past the end of the file (a truncated copy):
        # accounted for, not unknown
        beyond = 0
        # complete: the chain was read to its end and holds every page the header counts
        # (then no other page of the file can be a free page)
        complete = True
        bad_leaves = 0
        while pgno:
            if pgno in seen:
                errors.append("freelist trunk loop at page %d" % pgno)
                complete = False
                break
            seen.add(pgno)
            try:
                data = self.page(pgno)
            except FormatError as e:
                errors.append(str(e))
                complete = False
                break
            trunks.append(pgno)
            nxt, n = struct.unpack(">II", data[:8])
            if n > per_trunk:
                errors.append("trunk %d claims %d leaves" % (pgno, n))
                n = per_trunk
                complete = False
            for j in range(n):
                leaf = struct.unpack(">I", data[8 + 4 * j:12 + 4 * j])[0]
                if 1 <= leaf <= self.page_count and leaf not in seen:
                    seen.add(leaf)
                    leaves.append(leaf)
                elif self.page_count < leaf <= max(self.header.header_page_count,
                                                   self.page_count) and leaf not in seen:
                    seen.add(leaf)
                    beyond += 1
                else:
                    bad_leaves += 1
                    if bad_leaves <= 3:
                        errors.append("trunk %d: bad leaf page %d" % (pgno, leaf))
                    complete = False
            pgno = nxt
        if bad_leaves > 3:
            errors.append("%d more bad leaf page numbers" % (bad_leaves - 3))
        if len(trunks) + len(leaves) + beyond != self.header.freelist_count:
            errors.append("freelist holds %d pages, header says %d"
                          % (len(trunks) + len(leaves) + beyond, self.header.freelist_count))
            complete = False
        return {"trunks": trunks, "leaves": leaves, "errors": errors, "complete": complete,
                "beyond_eof": beyond}

    def trunk_like(self, pgno):
        """The leaf page numbers a page lists if it has the shape of a freelist trunk
        (next trunk, a count that fits, that many distinct pages of this file), else None.
        Evidence of free pages where the header's freelist pointer cannot be trusted."""
        try:
            data = self.page(pgno)
        except FormatError:
            return None
        nxt, n = struct.unpack(">II", data[:8])
        if n == 0 or n > self.usable_size // 4 - 2 or nxt > self.page_count or nxt == pgno:
            return None
        out = list(struct.unpack(">%dI" % n, data[8:8 + 4 * n]))
        if len(set(out)) != n or pgno in out or any(not 2 <= x <= self.page_count for x in out):
            return None
        return {"next": nxt, "leaves": out}

    def ptrmap_free_pages(self):
        """Pages the pointer map (auto_vacuum stores only) records as free."""
        if not self.header.vacuum_mode or self.page_count < 2 or not ptrmap_shaped(self.page(2)):
            return set()
        free = set()
        step = self.usable_size // 5 + 1
        p = 2
        while p <= self.page_count:
            data = self.page(p)
            for j in range(self.usable_size // 5):
                if data[5 * j] == 2 and p + 1 + j <= self.page_count:
                    free.add(p + 1 + j)
            p += step
        return free

    # ------------------------------------------------------------ b-tree walk

    def walk_btree(self, root, owner=None, claimed=None):
        """Walk the b-tree from root, tolerating bad pages.

        Returns a BTreeWalk: pages reached (by type), leaf pages, overflow pages,
        bad pages (with reason and the key range the parent gave them) and
        pages referenced twice. `claimed` (dict pgno -> owner) is shared across
        walks so a page claimed by another tree is reported, not walked again.
        """
        w = BTreeWalk(root, owner)
        claimed = {} if claimed is None else claimed
        # stack of (pgno, parent, lo_exclusive, hi_inclusive, depth)
        stack = [(root, None, None, None, 0)]
        while stack:
            pgno, parent, lo, hi, depth = stack.pop()
            if pgno in claimed:
                w.double_refs.append({"page": pgno, "parent": parent,
                                      "first_owner": claimed[pgno], "key_lo": lo, "key_hi": hi})
                continue
            if depth > 64:
                w.bad_pages[pgno] = {"reason": "tree deeper than 64", "parent": parent,
                                     "key_lo": lo, "key_hi": hi}
                continue
            try:
                page = self.btree_page(pgno)
            except FormatError as e:
                w.bad_pages[pgno] = {"reason": str(e), "parent": parent,
                                     "key_lo": lo, "key_hi": hi}
                continue
            if depth == 0:
                w.is_table = page.is_table
            elif page.is_table != w.is_table:
                w.bad_pages[pgno] = {"reason": "page type %s in a %s tree" % (
                    page.type_name, "table" if w.is_table else "index"),
                    "parent": parent, "key_lo": lo, "key_hi": hi}
                continue
            if page.type == TABLE_LEAF and page.ncells and (lo is not None or hi is not None):
                why = self._keys_outside(page, lo, hi)
                if why:
                    # a leaf of another table, or a stale one: the parent's range is a hole
                    w.bad_pages[pgno] = {"reason": why, "parent": parent, "key_lo": lo,
                                         "key_hi": hi, "foreign_leaf": True}
                    continue
            claimed[pgno] = owner if owner is not None else root
            w.pages[pgno] = page.type
            if page.is_leaf:
                w.leaves.append(pgno)
                data = self.page(pgno)
                U = self.usable_size
                # the most a payload can be and still stay wholly on the page
                X = U - 35 if page.type == TABLE_LEAF else ((U - 12) * 64 // 255) - 23
                for i, off in enumerate(page.cell_pointers):
                    # fast path: a payload size (first varint) of at most X means no
                    # overflow chain, whatever else the cell holds; read_cell would give
                    # no overflow page for it either (or an error, also skipped)
                    b0 = data[off]
                    if b0 < 0x80:
                        if b0 <= X:
                            continue
                    elif off + 1 < U and data[off + 1] < 0x80:
                        if ((b0 & 0x7F) << 7) | data[off + 1] <= X:
                            continue
                    try:
                        c = self.read_cell(page, i, follow_overflow=False)
                    except FormatError:
                        continue
                    for ov in self._overflow_page_list(c):
                        if ov not in claimed:
                            claimed[ov] = claimed[pgno]
                            w.overflow.append(ov)
                continue
            kids = []
            prev = lo
            for i in range(page.ncells):
                try:
                    c = self.read_cell(page, i, follow_overflow=False)
                except FormatError as e:
                    w.bad_cells.append({"page": pgno, "cell": i, "reason": str(e)})
                    continue
                key = c.rowid if page.is_table else None
                kids.append((c.left_child, prev, key))
                if not page.is_table:
                    for ov in self._overflow_page_list(c):
                        if ov not in claimed:
                            claimed[ov] = claimed[pgno]
                            w.overflow.append(ov)
                prev = key if page.is_table else prev
            kids.append((page.right_child, prev, hi))
            for child, clo, chi in reversed(kids):
                stack.append((child, pgno, clo, chi, depth + 1))
        return w

    def _keys_outside(self, page, lo, hi):
        """Why a table leaf's keys do not lie in (lo, hi], the range its parent gives it
        (keys are sorted on a page: the first and last cell tell), or None."""
        try:
            first = self.read_cell(page, 0, follow_overflow=False).rowid
            last = self.read_cell(page, page.ncells - 1, follow_overflow=False).rowid
        except FormatError as e:
            return str(e)
        if (lo is not None and first <= lo) or (hi is not None and last > hi):
            return "page %d: keys %d..%d outside the range (%s, %s] its parent gives" % (
                page.pgno, first, last, lo, hi)
        return None

    def _overflow_page_list(self, cell):
        if not cell.overflow_pages:
            return []
        try:
            local = local_payload_size(cell.payload_size, self.usable_size,
                                       cell.rowid is not None and cell.left_child is None)
            _, pages = self.read_overflow(cell.overflow_pages[0], cell.payload_size - local)
            return pages
        except FormatError:
            return []

    def leaf_records(self, pgno):
        """Decode every cell of a table leaf page: yields (cell, values_or_None).

        A cell that cannot be decoded is yielded with values None and cell.error set.
        """
        page = self.btree_page(pgno)
        if page.type != TABLE_LEAF:
            raise FormatError("page %d is %s, not a table leaf" % (pgno, page.type_name))
        for i in range(page.ncells):
            try:
                c = self.read_cell(page, i)
            except FormatError as e:
                try:
                    # its key and the bytes on the page, where only the chain is broken
                    c = self.read_cell(page, i, follow_overflow=False)
                    c.payload = None
                except FormatError:
                    c = Cell(pgno, i)
                c.error = str(e)
                yield c, None
                continue
            try:
                yield c, decode_record(c.payload, self.encoding)
            except FormatError as e:
                c.error = str(e)
                yield c, None

    def schema_rows(self):
        """sqlite_schema rows read from page 1's tree: list of dicts (bad cells skipped)."""
        out = []
        w = self.walk_btree(1)
        for pgno in w.leaves:
            for _c, vals in self.leaf_records(pgno):
                if vals is None or len(vals) < 5:
                    continue
                t, name, tbl, root, sql = vals[:5]
                if not isinstance(name, str):
                    continue
                out.append({"type": t, "name": name, "tbl_name": tbl,
                            "rootpage": root if isinstance(root, int) else 0, "sql": sql})
        return out

    # ------------------------------------------------------------ classifier

    def classify_pages(self, roots=None):
        """Type and owning root of every page in the file.

        roots: dict root_pgno -> name (defaults to sqlite_schema's, plus page 1).
        Returns dict(pages={pgno: {"kind", "owner"}}, walks={name: BTreeWalk},
        freelist=...). kind is a b-tree type name, "overflow", "freelist-trunk",
        "freelist-leaf", "ptrmap", "lock-byte", "zero" or "unknown"; owner is the
        name of the tree that reached it (None for orphans).
        """
        if roots is None:
            roots = {1: "sqlite_schema"}
            try:
                for r in self.schema_rows():
                    if r["rootpage"] and r["rootpage"] not in roots:
                        roots[r["rootpage"]] = r["name"]
            except FormatError:
                pass
        claimed = {}
        walks = {}
        for root in sorted(roots):
            walks[roots[root]] = self.walk_btree(root, roots[root], claimed)
        fl = self.freelist()
        pages = {}
        for pgno in range(1, self.page_count + 1):
            owner = claimed.get(pgno)
            kind = None
            if owner is not None:
                for w in walks.values():
                    if pgno in w.pages:
                        kind = PAGE_TYPE_NAMES[w.pages[pgno]]
                        break
                else:
                    kind = "overflow"
            pages[pgno] = {"kind": kind, "owner": owner}
        for t in fl["trunks"]:
            pages[t]["kind"] = pages[t]["kind"] or "freelist-trunk"
        for lf in fl["leaves"]:
            pages[lf]["kind"] = pages[lf]["kind"] or "freelist-leaf"
        if self.lock_byte_page <= self.page_count:
            pages[self.lock_byte_page]["kind"] = "lock-byte"
        if self.header.vacuum_mode:
            step = self.usable_size // 5 + 1
            p = 2
            while p <= self.page_count:
                pages[p]["kind"] = "ptrmap"
                p += step
        for pgno, info in pages.items():
            if info["kind"] is None:
                info["kind"] = self._guess_kind(pgno)
        return {"pages": pages, "walks": walks, "freelist": fl, "roots": roots}

    def _guess_kind(self, pgno):
        try:
            data = self.page(pgno)
        except FormatError:
            return "unknown"
        if not any(data):
            return "zero"
        try:
            return self.btree_page(pgno).type_name
        except FormatError:
            return "unknown"
