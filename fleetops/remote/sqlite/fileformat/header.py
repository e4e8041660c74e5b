"""The 100-byte database header: parsed when sound, inferred from the pages when damaged."""
import struct

from fleetops.remote.sqlite.fileformat.btree import btree_header_fits, ptrmap_shaped
from fleetops.remote.sqlite.fileformat.errors import FormatError

HEADER_MAGIC = b"SQLite format 3\x00"

ENCODINGS = {1: "utf-8", 2: "utf-16-le", 3: "utf-16-be"}


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
            if btree_header_fits(data, 0, ps):
                ok += 1
        if btree_header_fits(buf[:ps], 100, ps):
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
    if largest_root and (largest_root > pages or not ptrmap_shaped(buf[ps:2 * ps])):
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
