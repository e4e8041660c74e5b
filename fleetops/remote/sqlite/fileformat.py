"""A reader of the SQLite file format that never trusts the file.

Why: salvage must read pages SQLite itself refuses (under a damaged interior
page, orphaned, referenced twice) on hosts whose sqlite3 lacks .recover.
Stdlib only, Python 3.8+. Every decoding error is a FormatError, never an
IndexError or struct.error, so callers can skip one bad page or cell and go on.
"""
import mmap
import os
import struct

HEADER_MAGIC = b"SQLite format 3\x00"

# b-tree page types (first byte of the b-tree page header)
INDEX_INTERIOR = 2
TABLE_INTERIOR = 5
INDEX_LEAF = 10
TABLE_LEAF = 13
BTREE_TYPES = (INDEX_INTERIOR, TABLE_INTERIOR, INDEX_LEAF, TABLE_LEAF)
PAGE_TYPE_NAMES = {
    INDEX_INTERIOR: "index-interior",
    TABLE_INTERIOR: "table-interior",
    INDEX_LEAF: "index-leaf",
    TABLE_LEAF: "table-leaf",
}

ENCODINGS = {1: "utf-8", 2: "utf-16-le", 3: "utf-16-be"}

WAL_MAGIC = (0x377F0682, 0x377F0683)


class FormatError(Exception):
    """The bytes do not form what the SQLite file format says they should."""


class InvalidText(bytes):
    """A TEXT value whose bytes are not valid in the database's encoding, kept exactly as
    stored (SQLite itself stores and returns such bytes; only decoding them fails)."""

    __slots__ = ()


def text_or_invalid(data):
    """sqlite3 text_factory: str where the bytes are valid UTF-8, else InvalidText."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return InvalidText(data)


# ---------------------------------------------------------------- varints

def read_varint(buf, off):
    """Decode a SQLite varint at buf[off]; returns (value, next_offset).

    Values are signed 64-bit (the 9-byte form carries a full 8-bit last byte).
    """
    value = 0
    n = len(buf)
    for i in range(8):
        if off + i >= n:
            raise FormatError("varint runs past end of buffer at %d" % off)
        b = buf[off + i]
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            break
    else:
        if off + 8 >= n:
            raise FormatError("varint runs past end of buffer at %d" % off)
        value = (value << 8) | buf[off + 8]
        i = 8
    if value >= 1 << 63:
        value -= 1 << 64
    return value, off + i + 1


def encode_varint(value):
    """Encode a signed 64-bit integer as a SQLite varint (for tests and writers)."""
    if not -(1 << 63) <= value < (1 << 64):
        raise FormatError("varint out of 64-bit range")
    v = value & 0xFFFFFFFFFFFFFFFF
    if v > 0x00FFFFFFFFFFFFFF:
        out = [v & 0xFF]
        v >>= 8
        for _ in range(8):
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        return bytes(reversed(out))
    out = [v & 0x7F]
    v >>= 7
    while v:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    return bytes(reversed(out))


# ---------------------------------------------------------------- records

def serial_type_size(st):
    """Content size in bytes for a serial type (10 and 11 are reserved)."""
    if st < 0:
        raise FormatError("negative serial type %d" % st)
    if st <= 4:
        return (0, 1, 2, 3, 4)[st]
    if st == 5:
        return 6
    if st in (6, 7):
        return 8
    if st in (8, 9):
        return 0
    if st in (10, 11):
        raise FormatError("reserved serial type %d" % st)
    return (st - 12) // 2 if st % 2 == 0 else (st - 13) // 2


def _decode_value(st, data, encoding, errors):
    if st == 0:
        return None
    if 1 <= st <= 6:
        return int.from_bytes(data, "big", signed=True)
    if st == 7:
        return struct.unpack(">d", data)[0]
    if st == 8:
        return 0
    if st == 9:
        return 1
    if st % 2 == 0:
        return bytes(data)
    try:
        return bytes(data).decode(encoding, errors)
    except UnicodeDecodeError:
        return InvalidText(data)


def parse_record_header(payload):
    """Return (serial_types, header_size) for a record, checking it is sane."""
    hsize, off = read_varint(payload, 0)
    if hsize < 1 or hsize > len(payload):
        raise FormatError("record header size %d outside payload of %d" % (hsize, len(payload)))
    types = []
    while off < hsize:
        st, off = read_varint(payload, off)
        serial_type_size(st)
        types.append(st)
    if off != hsize:
        raise FormatError("record header overruns its declared size")
    return types, hsize


def decode_record(payload, encoding="utf-8", errors="strict"):
    """Decode a record into a list of Python values (None/int/float/bytes/str)."""
    types, off = parse_record_header(payload)
    values = []
    n = len(payload)
    for st in types:
        size = serial_type_size(st)
        if off + size > n:
            raise FormatError("record body shorter than its header says")
        values.append(_decode_value(st, payload[off:off + size], encoding, errors))
        off += size
    if off != n:
        raise FormatError("record body has %d trailing bytes" % (n - off))
    return values


# ---------------------------------------------------------------- header

class Header(object):
    """The 100-byte database header, with the fields salvage needs."""

    __slots__ = ("page_size", "write_version", "read_version", "reserved", "change_counter",
                 "header_page_count", "freelist_trunk", "freelist_count", "schema_cookie",
                 "schema_format", "text_encoding", "encoding", "user_version",
                 "vacuum_mode", "version_valid_for", "sqlite_version", "usable_size",
                 "incremental_vacuum", "application_id")

    def as_dict(self):
        return dict((k, getattr(self, k)) for k in self.__slots__)


def parse_header(buf):
    """Parse the first 100 bytes; raises FormatError if they are not a SQLite header."""
    if len(buf) < 100:
        raise FormatError("file shorter than the 100-byte header")
    if bytes(buf[:16]) != HEADER_MAGIC:
        raise FormatError("bad magic string")
    h = Header()
    ps = struct.unpack(">H", buf[16:18])[0]
    if ps == 1:
        ps = 65536
    if ps < 512 or ps > 65536 or ps & (ps - 1):
        raise FormatError("bad page size %d" % ps)
    h.page_size = ps
    h.write_version = buf[18]
    h.read_version = buf[19]
    h.reserved = buf[20]
    if ps - h.reserved < 480:
        raise FormatError("usable size %d too small" % (ps - h.reserved))
    h.usable_size = ps - h.reserved
    (h.change_counter, h.header_page_count, h.freelist_trunk, h.freelist_count,
     h.schema_cookie, h.schema_format) = struct.unpack(">6I", buf[24:48])
    h.text_encoding = struct.unpack(">I", buf[56:60])[0]
    h.encoding = ENCODINGS.get(h.text_encoding, "utf-8")
    h.user_version = struct.unpack(">i", buf[60:64])[0]
    h.vacuum_mode = struct.unpack(">I", buf[52:56])[0]
    h.incremental_vacuum = struct.unpack(">I", buf[64:68])[0]
    h.application_id = struct.unpack(">i", buf[68:72])[0]
    h.version_valid_for, h.sqlite_version = struct.unpack(">II", buf[92:100])
    return h


def infer_header(buf):
    """(header bytes, inferred field names) for a file whose 100-byte header is damaged but
    whose pages can be read: the page size the pages agree with (b-tree page headers that
    parse at odd multiples of it; the smallest that fits about as well as the best), the other fields
    checked one by one and set to what SQLite writes by default where they are impossible.
    The freelist fields are reported unknown (and zeroed) when they point outside the file
    or when the header lost more than its magic string. FormatError when no page size fits."""
    size = len(buf)
    if size < 1024:
        raise FormatError("file of %d bytes: too short to infer a header" % size)
    old = bytes(buf[:100]).ljust(100, b"\x00")
    hdr = bytearray(old)
    inferred = []
    if old[:16] != HEADER_MAGIC:
        hdr[:16] = HEADER_MAGIC
        inferred.append("magic")
    scores = {}
    for ps in (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536):
        n = size // ps
        if n < 2:
            continue
        # pages at odd multiples of ps: page starts if the page size is ps or smaller,
        # the middle of a page (almost never a b-tree header) if it is larger
        odd = list(range(2, n + 1, 2))
        sample = sorted(set(odd[(i * (len(odd) - 1)) // 127] for i in range(128))) if odd else []
        ok = nonzero = 0
        for p in sample:
            data = buf[(p - 1) * ps:p * ps]
            if not any(data[:16]):
                continue
            nonzero += 1
            if _btree_header_fits(data, 0, ps):
                ok += 1
        if _btree_header_fits(buf[:ps], 100, ps):
            ok += 1
            nonzero += 1
        if ok >= 2:
            scores[ps] = ok / float(nonzero)
    if not scores:
        raise FormatError("no page size fits: no b-tree pages found")
    best = max(scores.values())
    # every size from the true one up scores about the same; smaller ones about nothing
    ps = min(p for p, f in scores.items() if f >= 0.5 * best)
    raw = struct.unpack(">H", old[16:18])[0]
    if (65536 if raw == 1 else raw) != ps:
        struct.pack_into(">H", hdr, 16, 1 if ps == 65536 else ps)
        inferred.append("page_size")
    if old[18] not in (1, 2) or old[19] not in (1, 2):
        hdr[18:20] = b"\x01\x01"
        inferred.append("file_format_versions")
    if ps - old[20] < 480 or (old[20] and "magic" in inferred):
        hdr[20] = 0
        inferred.append("reserved")
    if old[21:24] != b"\x40\x20\x20":
        hdr[21:24] = b"\x40\x20\x20"
        inferred.append("payload_fractions")
    pages = size // ps
    trunk, count = struct.unpack(">II", old[32:40])
    if trunk > pages or count > pages or (len(inferred) > 1 and "magic" in inferred):
        hdr[32:40] = bytes(8)
        inferred.extend(["freelist_trunk", "freelist_count"])
    largest_root = struct.unpack(">I", old[52:56])[0]
    if largest_root and (largest_root > pages or not _ptrmap_shaped(buf[ps:2 * ps])):
        hdr[52:56] = bytes(4)
        hdr[64:68] = bytes(4)
        inferred.append("auto_vacuum")
    if not 1 <= struct.unpack(">I", old[44:48])[0] <= 4:
        struct.pack_into(">I", hdr, 44, 4)
        inferred.append("schema_format")
    if struct.unpack(">I", old[56:60])[0] not in (1, 2, 3):
        struct.pack_into(">I", hdr, 56, 1)
        inferred.append("text_encoding")
    # the page count SQLite may trust: the file's own
    struct.pack_into(">I", hdr, 28, pages)
    hdr[92:96] = hdr[24:28]
    parse_header(bytes(hdr))
    return bytes(hdr), inferred


def _ptrmap_shaped(data):
    """Page 2 of an auto_vacuum file is a pointer map: 5-byte entries of type 1..5 (0 past
    the last page it maps)."""
    types = [data[i] for i in range(0, len(data) - 4, 5)]
    if not types or types[0] not in (1, 2, 3, 4, 5):
        return False
    tail = False
    for t in types:
        if t == 0:
            tail = True
        elif tail or t > 5:
            return False
    return True


def _btree_header_fits(data, hoff, ps):
    """A b-tree page header at data[hoff] whose cell pointers fit a page of ps bytes."""
    if len(data) < hoff + 12 or data[hoff] not in BTREE_TYPES:
        return False
    _fb, ncells, cs, frag = struct.unpack(">HHHB", data[hoff + 1:hoff + 8])
    cs = 65536 if cs == 0 else cs
    hlen = 8 if data[hoff] in (INDEX_LEAF, TABLE_LEAF) else 12
    end = hoff + hlen + 2 * ncells
    if end > ps or cs > ps or (ncells and cs < end) or frag > 60:
        return False
    if ncells == 0:
        return data[hoff] in (INDEX_LEAF, TABLE_LEAF) and cs == ps or False
    ptrs = struct.unpack(">%dH" % ncells, data[hoff + hlen:end])
    return all(cs <= x < ps for x in ptrs)


# ---------------------------------------------------------------- pages

class BTreePage(object):
    """A parsed b-tree page header plus its cell pointer array."""

    __slots__ = ("pgno", "type", "first_freeblock", "ncells", "content_start",
                 "fragmented", "right_child", "cell_pointers", "header_offset")

    @property
    def is_leaf(self):
        return self.type in (TABLE_LEAF, INDEX_LEAF)

    @property
    def is_table(self):
        return self.type in (TABLE_LEAF, TABLE_INTERIOR)

    @property
    def type_name(self):
        return PAGE_TYPE_NAMES.get(self.type, "unknown")


class Cell(object):
    """One decoded cell. payload is complete (overflow followed) or None."""

    __slots__ = ("pgno", "index", "rowid", "left_child", "payload_size", "payload",
                 "overflow_pages", "error", "suspect")

    def __init__(self, pgno, index):
        self.pgno = pgno
        self.index = index
        self.rowid = None
        self.left_child = None
        self.payload_size = None
        self.payload = None
        self.overflow_pages = []
        self.error = None
        self.suspect = []        # why its bytes may not be what was written (it decodes)


def local_payload_size(payload_size, usable_size, table_leaf):
    """Bytes of a payload stored on the b-tree page itself (the U/P/X/M/K rule)."""
    U, P = usable_size, payload_size
    X = U - 35 if table_leaf else ((U - 12) * 64 // 255) - 23
    if P <= X:
        return P
    M = ((U - 12) * 32 // 255) - 23
    K = M + ((P - M) % (U - 4))
    return K if K <= X else M


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
        if not self.header.vacuum_mode or self.page_count < 2 or not _ptrmap_shaped(self.page(2)):
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


class BTreeWalk(object):
    """What one tolerant walk from a root found."""

    def __init__(self, root, owner):
        self.root = root
        self.owner = owner
        self.is_table = True
        self.pages = {}          # pgno -> page type
        self.leaves = []
        self.overflow = []
        self.bad_pages = {}      # pgno -> {reason, parent, key_lo, key_hi}
        self.bad_cells = []
        self.double_refs = []

    def as_dict(self):
        return {"root": self.root, "owner": self.owner, "pages": len(self.pages),
                "leaves": len(self.leaves), "overflow": len(self.overflow),
                "bad_pages": self.bad_pages, "bad_cells": self.bad_cells,
                "double_refs": self.double_refs}


# ---------------------------------------------------------------- WAL

def _wal_checksum(data, s0, s1, big_endian):
    fmt = (">" if big_endian else "<") + "%dI" % (len(data) // 4)
    words = struct.unpack(fmt, data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def read_wal(path, page_size=None):
    """Committed frames of a WAL file, as SQLite would replay them.

    Returns dict(pages={pgno: bytes} as of the last valid commit, db_pages,
    frames_total, frames_valid, frames_committed, stale_frames, uncommitted_frames,
    partial_frame_bytes, torn). Frames of an earlier generation after the valid ones (other
    salts) are stale, not torn; a torn tail (a frame of this generation failing its checksum,
    frames after the last commit, a partial frame) is ignored, never applied.
    """
    with open(path, "rb") as fh:
        data = fh.read()
    res = {"pages": {}, "db_pages": None, "frames_total": 0, "frames_valid": 0,
           "frames_committed": 0, "torn": False, "error": None}
    if len(data) < 32:
        res["error"] = "wal shorter than its header" if data else None
        return res
    magic, version, psize, _ckseq, salt1, salt2, c1, c2 = struct.unpack(">8I", data[:32])
    if magic not in WAL_MAGIC:
        res["error"] = "bad wal magic"
        return res
    big = magic & 1
    if psize == 1:
        psize = 65536
    if page_size and psize != page_size:
        res["error"] = "wal page size %d != db page size %d" % (psize, page_size)
        return res
    if psize < 512 or psize > 65536 or psize & (psize - 1):
        res["error"] = "bad wal page size"
        return res
    s0, s1 = _wal_checksum(data[:24], 0, 0, big)
    if (s0, s1) != (c1, c2):
        res["error"] = "wal header checksum mismatch"
        return res
    fsize = 24 + psize
    nframes = (len(data) - 32) // fsize
    res["frames_total"] = nframes
    pending = {}
    off = 32
    broke = None
    for _ in range(nframes):
        fh_ = data[off:off + 24]
        pgno, commit, fs1, fs2, fc1, fc2 = struct.unpack(">6I", fh_)
        if (fs1, fs2) != (salt1, salt2):
            broke = "salt"
            break
        if pgno == 0:
            broke = "frame"
            break
        s0, s1 = _wal_checksum(fh_[:8], s0, s1, big)
        s0, s1 = _wal_checksum(data[off + 24:off + fsize], s0, s1, big)
        if (s0, s1) != (fc1, fc2):
            broke = "checksum"
            break
        res["frames_valid"] += 1
        pending[pgno] = data[off + 24:off + fsize]
        if commit:
            res["pages"].update(pending)
            pending = {}
            res["db_pages"] = commit
            res["frames_committed"] = res["frames_valid"]
        off += fsize
    # after the valid frames: frames of an earlier generation (other salts: what a WAL
    # restart leaves behind, normal) are stale; frames of this generation that do not check
    # out, valid frames with no commit after them, or a partial frame are a torn tail
    rest = nframes - res["frames_valid"]
    stale = 0
    if broke == "salt":
        for k in range(res["frames_valid"], nframes):
            o = 32 + k * fsize
            if struct.unpack(">II", data[o + 8:o + 16]) != (salt1, salt2):
                stale += 1
    res["stale_frames"] = stale
    res["uncommitted_frames"] = res["frames_valid"] - res["frames_committed"]
    res["partial_frame_bytes"] = (len(data) - 32) % fsize
    res["torn"] = bool(res["uncommitted_frames"] or rest - stale or res["partial_frame_bytes"])
    return res


def apply_wal(db_path, wal_path):
    """Write the WAL's committed frames into db_path (a private copy!).

    Returns the read_wal summary without the page bytes.
    """
    with open(db_path, "rb") as fh:
        head = fh.read(100)
    try:
        psize = parse_header(head).page_size
    except FormatError:
        psize = None
    w = read_wal(wal_path, psize)
    psize = psize or (len(next(iter(w["pages"].values()))) if w["pages"] else None)
    if w["pages"] and psize:
        with open(db_path, "r+b") as fh:
            for pgno in sorted(w["pages"]):
                fh.seek((pgno - 1) * psize)
                fh.write(w["pages"][pgno])
            if w["db_pages"]:
                fh.truncate(w["db_pages"] * psize)
    summary = dict((k, v) for k, v in w.items() if k != "pages")
    summary["pages_applied"] = len(w["pages"])
    return summary


