"""B-tree page and cell shapes: page types, the header fit test, cells, the payload split rule."""
import struct

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


def ptrmap_shaped(data):
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


def btree_header_fits(data, hoff, ps):
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
