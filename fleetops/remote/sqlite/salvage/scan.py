"""The page scan: every page classified by the file-format reader, every table leaf decoded
and given to its table (by root page, else by the shape of its rows), free pages held back.
"""
import time

from fleetops.remote.sqlite.fileformat.btree import PAGE_TYPE_NAMES, TABLE_LEAF
from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.salvage import index_evidence, walk
from fleetops.remote.sqlite.salvage.model import (
    Table,
    column_affinity,
    affinity_doubts,
    assign_page,
    normalize,
    shape_score,
)
from fleetops.remote.sqlite.salvage.sqlutil import content_key


def page_scan(s):
    """Classify every page, decode every table leaf of a target tree or orphaned."""
    roots = {1: "sqlite_schema"}
    for r in s.schema.schema_rows:
        if r.get("rootpage") and r["rootpage"] > 1:
            roots[r["rootpage"]] = r["name"]
    cls = s.image.reader.classify_pages(roots)
    s.scan.classes = cls
    t0 = time.monotonic()
    index_evidence.read_copies(s)
    s.tick("index_read", t0)
    rd = s.image.reader
    freelist, s.scan.free_evidence = _free_pages(rd, cls, s.image.header_inferred)
    s.scan.free_set = freelist
    counts = {}
    for info in cls["pages"].values():
        counts[info["kind"]] = counts.get(info["kind"], 0) + 1
    s.report["pages"] = {"total": rd.page_count, "page_size": rd.page_size,
                         "by_kind": counts,
                         "freelist_errors": cls["freelist"]["errors"]}
    mirror_double_refs(s, cls)
    # lineage
    for name, st in s.schema.states.items():
        w = cls["walks"].get(name)
        if w is None:
            continue
        st.bad_pages.update(w.bad_pages)
        st.bad_cells.extend(w.bad_cells)
        st.double_refs.extend(w.double_refs)
        for pgno in w.leaves:
            decode_leaf(s, st, pgno)
    for st in s.schema.states.values():
        foreign_leaves(s, st)
    # orphans and freelist leaves, assigned by shape
    candidates = [t for t in s.schema.tables.values() if t.columns and not t.without_rowid
                  and not t.virtual]
    schema_t = Table("sqlite_schema", None, 1)
    schema_t.columns = ["type", "name", "tbl_name", "rootpage", "sql"]
    schema_t.decl = ["text", "text", "text", "int", "text"]
    schema_t.affinity = [column_affinity(d) for d in schema_t.decl]
    schema_t.notnull = [False] * 5
    schema_t.defaults = [None] * 5
    candidates.append(schema_t)
    unattributed = []
    orphan_assign = []
    fl_records = []
    # pages a walk reached but could not read belong to that walk's tree
    attributed_bad = {}
    for w in cls["walks"].values():
        for pgno in w.bad_pages:
            attributed_bad.setdefault(pgno, w.owner)
    s.report["unreadable_pages_by_tree"] = dict(
        (str(k), v) for k, v in sorted(attributed_bad.items()))
    orphans = [pgno for pgno, info in sorted(cls["pages"].items())
               if info["owner"] is None and pgno not in attributed_bad
               and info["kind"] not in ("lock-byte", "ptrmap", "freelist-trunk")]
    # overflow pages hanging off orphaned or freed b-tree pages are not unreadable pages
    chained = set()
    for pgno in orphans:
        if cls["pages"][pgno]["kind"] not in PAGE_TYPE_NAMES.values() and pgno not in freelist:
            continue
        try:
            page = rd.btree_page(pgno)
            for i in range(page.ncells):
                c = rd.read_cell(page, i, follow_overflow=False)
                for ov in rd._overflow_page_list(c):
                    if cls["pages"].get(ov, {}).get("owner") is None:
                        chained.add(ov)
        except FormatError:
            continue
    for pgno in orphans:
        info = cls["pages"][pgno]
        on_fl = pgno in freelist
        if pgno in chained:
            continue
        if info["kind"] in ("zero", "unknown") and not on_fl:
            unattributed.append({"page": pgno, "kind": info["kind"]})
            continue
        if on_fl:
            try:
                page = rd.btree_page(pgno)
            except FormatError:
                continue
            if page.type != TABLE_LEAF:
                continue
        elif info["kind"] != "table-leaf":
            continue   # orphan index or interior pages hold no rows of their own
        recs = []
        try:
            for cell, vals in rd.leaf_records(pgno):
                recs.append((cell, vals))
        except FormatError as e:
            if not on_fl:
                unattributed.append({"page": pgno, "kind": info["kind"], "reason": str(e)})
            continue
        good = [v for c, v in recs if v is not None]
        if not good:
            if not on_fl and recs:
                unattributed.append({"page": pgno, "kind": info["kind"],
                                     "reason": "no decodable record"})
            continue
        tname, why, tied = assign_page(candidates, good)
        if on_fl:
            fl_records.append((pgno, tname, recs))
            continue
        orphan_assign.append({"page": pgno, "table": tname, "reason": why,
                              "records": len(recs)})
        if tname in s.schema.states and hold_back(s, pgno, s.schema.states[tname], recs):
            orphan_assign[-1]["held_back"] = True
            continue
        if tname in s.schema.states:
            st = s.schema.states[tname]
            st.orphan_pages.append(pgno)
            add_records(s, st, pgno, recs, shape_check=True)
        elif tname is None and any(n in s.schema.states for n in tied):
            unattributed.append({"page": pgno, "kind": "table-leaf", "reason": why,
                                 "records": len(recs)})
            for c, v in recs:
                walk.quarantine(s, None, c.rowid, v, "orphan leaf page %d: %s" % (pgno, why),
                                 page=pgno)
    s.scan.unattributed = unattributed
    s.report["orphan_leaf_pages"] = orphan_assign
    s.report["unattributed_pages"] = unattributed
    nfl = 0
    for pgno, tname, recs in fl_records:
        for c, v in recs:
            if v is None and c.rowid is None:
                continue
            nfl += 1
            if tname in s.schema.states:
                s.schema.states[tname].freelist_records += 1
            if s.args.quarantine_freelist:
                walk.quarantine(s, tname, c.rowid, v, "deleted row on freelist page %d "
                                 "(not restored)%s" % (pgno, "" if v is not None else
                                                       ", undecodable: " + str(c.error)),
                                 page=pgno, count=False, raw=c.payload if v is None else None)
    s.report["freelist"] = {"trunks": len(cls["freelist"]["trunks"]),
                            "leaves": len(cls["freelist"]["leaves"]),
                            "records_on_freelist": nfl,
                            "restored": 0,
                            "quarantined": nfl if s.args.quarantine_freelist else 0,
                            "evidence": s.scan.free_evidence}
    s.report["held_back"] = s.scan.held_back


def hold_back(s, pgno, st, recs):
    """True (and the rows quarantined, with the reason) when an orphan leaf may be a
    former page rather than a lost live one: its table's indexes do not hold every row of
    it, as it reads, under keys its tree lacks (index_evidence.vouch_for_orphan), and nothing in its table's tree can have lost
    its keys (no unreadable page, no double reference, no foreign leaf over them), or
    the free pages are not all known and no interior page still points at it."""
    keys = [c.rowid for c, v in recs if c.rowid is not None]
    if index_evidence.vouch_for_orphan(s, st, recs):
        return False
    holes = tree_holes(s, st)
    covered = all(any((lo is None or k > lo) and (hi is None or k <= hi)
                      for lo, hi in holes) for k in keys)
    why = None
    if not covered:
        kind = "tree intact"
        why = ("orphan leaf page %d: the tree of %s lost no page over its keys %s..%s; a "
               "former page (freed or superseded), not restored"
               % (pgno, st.t.name, min(keys) if keys else None, max(keys) if keys else None))
    elif not s.scan.free_evidence["complete"] and pgno not in interior_children(s):
        kind = "free pages unknown"
        why = ("orphan leaf page %d may be a former free page: the free pages are not all "
               "known (%s) and no interior page points at it; not restored"
               % (pgno, "; ".join(s.scan.free_evidence["incomplete_because"]) or "?"))
    if why is None:
        return False
    hb = s.scan.held_back
    hb["pages"] += 1
    hb["rows"] += len(recs)
    hb["by_reason"][kind] = hb["by_reason"].get(kind, 0) + len(recs)
    st.held_back[kind] = st.held_back.get(kind, 0) + len(recs)
    for c, v in recs:
        walk.quarantine(s, st.t.name, c.rowid, v, "held back: " + why, page=pgno, count=False,
                         raw=c.payload if v is None else None)
    return True


def tree_holes(s, st):
    """Key ranges (lo exclusive, hi inclusive; None unbounded) where the tree of a table
    may have lost live pages."""
    w = s.scan.classes["walks"].get(st.t.name)
    if w is None or not st.t.rootpage:
        return [(None, None)]           # root unknown: anything may be lost
    out = [(i.get("key_lo"), i.get("key_hi")) for i in w.bad_pages.values()]
    out += [(d.get("key_lo"), d.get("key_hi")) for d in w.double_refs]
    if w.bad_cells:
        out.append((None, None))        # an unreadable interior cell: range unknown
    return out


def interior_children(s):
    """Pages some readable, not free, table interior page points at."""
    if s.scan.interior_children is None:
        kids = set()
        for pgno, info in s.scan.classes["pages"].items():
            if info["kind"] != "table-interior" or pgno in s.scan.free_set:
                continue
            try:
                kids.update(s.image.reader.children(s.image.reader.btree_page(pgno)))
            except FormatError:
                continue
        s.scan.interior_children = kids
    return s.scan.interior_children


def foreign_leaves(s, st):
    """Leaves the tree of st's table points at that another tree owns (or whose keys do
    not fit): by record shape, either the table's own (decoded as its lineage) or the
    other table's, whose records SQLite's walk will return as this table's rows (noted,
    to tell them from this table's own versions of those keys)."""
    w = s.scan.classes["walks"].get(st.t.name)
    if w is None:
        return
    pages = [(d["page"], d.get("first_owner")) for d in w.double_refs
             if d.get("first_owner") not in (None, st.t.name)]
    pages += [(p, None) for p, i in w.bad_pages.items() if i.get("foreign_leaf")]
    for pgno, other in pages:
        try:
            recs = list(s.image.reader.leaf_records(pgno))
        except FormatError:
            continue
        good = [v for c, v in recs if v is not None]
        cands = [st.t] + [t for t in s.schema.tables.values()
                          if t.columns and not t.without_rowid and not t.virtual
                          and t.name != st.t.name and (other is None or t.name == other)]
        tname, _why, _tied = assign_page(cands, good) if good else (None, None, [])
        if tname == st.t.name:
            add_records(s, st, pgno, recs, shape_check=False)
            continue
        for c, v in recs:
            if v is not None and c.rowid is not None:
                ck = content_key(normalize(st.t, c.rowid, v))
                st.foreign_cells.setdefault(c.rowid, {})[ck] = pgno


def mirror_double_refs(s, cls):
    """A page two trees reach belongs to at most one of them, and the walk that reached it
    first took it as its own: noted in that walk too, with the other tree as its possible
    owner and the page's own keys as the range it covers (so foreign_leaves weighs it).
    When its records fit the other tree's table better, it is no leaf of the first one's
    lineage: SQLite's walk of the first returns another table's rows there."""
    walks = cls["walks"]
    for w in list(walks.values()):
        for d in list(w.double_refs):
            first = walks.get(d.get("first_owner"))
            if first is None or first is w or d.get("mirror"):
                continue
            try:
                page = s.image.reader.btree_page(d["page"])
                keys = [s.image.reader.read_cell(page, i, follow_overflow=False).rowid
                        for i in range(page.ncells)] if page.type == TABLE_LEAF else []
            except FormatError:
                keys = []
            keys = [k for k in keys if k is not None]
            first.double_refs.append({
                "page": d["page"], "parent": None, "first_owner": w.owner, "mirror": True,
                "key_lo": min(keys) - 1 if keys else None, "key_hi": max(keys) if keys else None})
            own, other = s.schema.tables.get(first.owner), s.schema.tables.get(w.owner)
            if keys and own is not None and other is not None and own.columns and other.columns \
                    and d["page"] in first.leaves:
                try:
                    good = [v for _c, v in s.image.reader.leaf_records(d["page"]) if v is not None]
                except FormatError:
                    continue
                if good and assign_page([own, other], good)[0] == other.name:
                    first.leaves.remove(d["page"])


def decode_leaf(s, st, pgno):
    try:
        recs = list(s.image.reader.leaf_records(pgno))
    except FormatError as e:
        st.bad_pages[pgno] = {"reason": str(e)}
        return
    add_records(s, st, pgno, recs, shape_check=False)


def add_records(s, st, pgno, recs, shape_check):
    t = st.t
    for cell, vals in recs:
        if vals is None:
            st.bad_cells.append({"page": pgno, "cell": cell.index, "rowid": cell.rowid,
                                 "reason": cell.error})
            if cell.rowid is not None:
                st.undecodable += 1
                walk.quarantine(s, t.name, cell.rowid, None, "undecodable cell %d on page %d: %s"
                                 % (cell.index, pgno, cell.error), page=pgno,
                                 raw=cell.payload)
            continue
        if shape_check and shape_score(t, vals) is None:
            st.undecodable += 1
            walk.quarantine(s, t.name, cell.rowid, vals, "record on orphan page %d does not fit "
                             "table %s" % (pgno, t.name), page=pgno)
            continue
        if len(vals) > len(t.columns):
            st.undecodable += 1
            walk.quarantine(s, t.name, cell.rowid, vals, "record has %d columns, table %d"
                             % (len(vals), len(t.columns)), page=pgno)
            continue
        v = st.add(cell.rowid, normalize(t, cell.rowid, vals), cell=(pgno, cell.index),
                   lineage=not shape_check)
        for why in cell.suspect + affinity_doubts(t, vals):
            if why not in v.suspect:
                v.suspect.append(why)


def _free_pages(rd, cls, header_inferred):
    """Every page known to be free, from every source of evidence, and whether that is all
    of them: the freelist as the header points at it (its pages that a tree owns dropped),
    pages shaped like freelist trunks that no tree owns and the pages they list, and the
    pointer map where there is one. Complete when the chain read to its end and accounts
    for the header's count (or, with the header's freelist fields unknown, the trunks found
    form one chain ending in 0)."""
    pages = cls["pages"]
    fl = cls["freelist"]
    why = []
    trusted = not ({"freelist_trunk", "freelist_count"} & set(header_inferred))
    walked = [p for p in fl["trunks"] + fl["leaves"] if pages[p]["owner"] is None]
    if not trusted:
        walked = []
        why.append("the header's freelist fields are not the source's")
    elif len(walked) != len(fl["trunks"]) + len(fl["leaves"]):
        why.append("the freelist chain runs through pages a b-tree owns")
    elif not fl["complete"]:
        why.append("; ".join(fl["errors"]) or "freelist chain unreadable")
    free = set(walked)
    scanned = {}
    for pgno, info in pages.items():
        if info["owner"] is not None or pgno in free or info["kind"] in PAGE_TYPE_NAMES.values():
            continue
        t = rd.trunk_like(pgno)
        if t and not any(pages[x]["owner"] for x in t["leaves"]):
            scanned[pgno] = t
    for pgno, t in scanned.items():
        free.add(pgno)
        free.update(t["leaves"])
    ptrmap = rd.ptrmap_free_pages()
    free |= set(p for p in ptrmap if pages.get(p, {}).get("owner") is None)
    if not why:
        complete = True
    elif trusted:
        # what was missed is found again if the count now adds up
        complete = (len(free) + fl.get("beyond_eof", 0) == rd.header.freelist_count
                    and bool(scanned))
    else:
        nexts = dict((p, t["next"]) for p, t in scanned.items())
        heads = [p for p in nexts if p not in nexts.values()]
        complete = len(heads) <= 1 and all(n == 0 or n in nexts for n in nexts.values())
    return free, {"complete": complete, "incomplete_because": [] if complete else why,
                  "freelist_walked": len(walked), "trunks_found_by_shape": sorted(scanned),
                  "ptrmap_free": len(ptrmap), "known_free": len(free),
                  "header_freelist_count": rd.header.freelist_count if trusted else None}
