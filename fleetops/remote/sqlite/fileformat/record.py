"""SQLite varints and records: the byte encoding of every cell's payload."""
import struct

from fleetops.remote.sqlite.fileformat.errors import FormatError


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
