"""The verdict rules: the conditions a store is in (worst first), the reasons that name each
finding, errors per object, and the warnings that never change the verdict. A check that could
not complete fails closed."""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

VERDICTS = ("healthy", "fts_index_damage", "index_damage", "structural_corruption",
            "unreadable", "retired_wal", "not_persisting", "missing")
# Worst first: what an operator must look at first.
SEVERITY = {"structural_corruption": 6, "unreadable": 6, "retired_wal": 5, "not_persisting": 5, "index_damage": 4,
            "fts_index_damage": 3, "missing": 2, "healthy": 0}


def classify(rec: Dict[str, Any]) -> Tuple[str, List[str], List[str]]:
    """Classify from the gathered figures; fail closed when a check could not complete."""
    conds: List[str] = []
    reasons: List[str] = []
    integ = rec.get("integrity") or {}
    by_obj = integ.get("by_object") or {}
    kinds: Dict[str, List[str]] = {}
    for name, g in by_obj.items():
        kinds.setdefault(g["kind"], []).append(name)
    if rec["holders"] and rec["holders"].get("retired"):
        conds.append("retired_wal")
        reasons.append("a process holds a deleted (retired) WAL generation: stop it, do not repair")
    structural: List[str] = []
    index: List[str] = []
    fts: List[str] = []
    for name in kinds.get("table", []) + kinds.get("constraint", []):
        structural.append("%s: %d integrity errors" % (name, by_obj[name]["count"]))
    if integ.get("unreferenced_pages") and not by_obj:
        # Pages cut off from a damaged tree are its consequence; alone they mean a lost subtree.
        structural.append("%d pages never used (no tree accounts for them)" % integ["unreferenced_pages"])
    for name in kinds.get("index", []):
        index.append("%s: %d integrity errors" % (name, by_obj[name]["count"]))
    for name in kinds.get("fts", []):
        fts.append("%s: %d integrity errors" % (name, by_obj[name]["count"]))
    if integ.get("aborted") and not (integ.get("fallback") or {}).get("done"):
        structural.append("integrity check aborted (%s) and could not be localised: %s"
                          % (integ["aborted"], (integ.get("fallback") or {}).get("reason")))
    for t, h in (rec.get("honesty") or {}).items():
        if h["errors"]:
            structural.append("%s: table scan failed: %s" % (t, h["errors"][0]))
        if h["duplicates"]:
            structural.append("%s: %d duplicated rows (%s physical, %s distinct)" % (
                t, h["duplicates"], h["count_scan"],
                min(d for d in (h["distinct_rowid"], h["distinct_pk"]) if d is not None)))
        for iname, i in h["indexes"].items():
            if i.get("error_side") == "table" or (i.get("error") and not i.get("error_side")):
                structural.append("%s: table scan for %s failed: %s" % (t, iname, i["error"]))
            elif i.get("ok") is False:
                index.append(index_reason(t, iname, i))
        stale = stale_rows(h["indexes"])
        if stale:
            structural.append(stale_reason(t, stale, len(h["indexes"])))
        if h["count"] is not None and h["count_scan"] is not None and h["count"] != h["count_scan"] \
                and not any(i.get("ok") is False for i in h["indexes"].values()) and not h["duplicates"]:
            index.append("%s: count(*) %d but table scan %d" % (t, h["count"], h["count_scan"]))
    fk = rec.get("foreign_keys") or {}
    if fk.get("violations"):
        structural.append("%d foreign key violations (%s)" % (
            fk["violations"], ", ".join("%s %d" % kv for kv in sorted(fk["by_table"].items()))))
    for name, f in (rec.get("fts") or {}).items():
        for e in f.get("errors") or []:
            fts.append("%s: %s" % (name, e))
    if structural:
        conds.append("structural_corruption")
    if index:
        conds.append("index_damage")
    if fts:
        conds.append("fts_index_damage")
    reasons += structural + index + fts
    verdict = conds[0] if conds else "healthy"
    return verdict, conds, reasons


def stale_rows(indexes: Dict[str, Dict[str, Any]]) -> Set[Any]:
    """Rows the table and every one of its (two or more) indexes disagree on: a row none of them
    holds, or one at least two of them hold with other values. One index against its table cannot
    say which side is wrong; when all of them agree against the table, the table's page is the
    stale copy (a lost write), and rebuilding the indexes from it would lose the current rows."""
    read = [i for i in indexes.values() if i.get("ok") is not None and not i.get("error")]
    if len(read) < 2:
        return set()
    absent = set.intersection(*(set(i.get("lacks_rows") or []) for i in read))
    # entries every index holds under a rowid the table has nowhere: the row was renumbered (its
    # rowid flipped in the table's cell), its values are intact and the indexes can be rebuilt
    orphans = set.intersection(*(set(i.get("excess_rows") or []) - set(i.get("lacks_rows") or []) for i in read))
    if len(absent) <= len(orphans):
        absent = set()
    contradicted = [set(i.get("lacks_rows") or []) & set(i.get("excess_rows") or []) for i in read]
    twice = {r for r in set().union(*contradicted) if sum(r in c for c in contradicted) >= 2}
    return absent | twice


def stale_reason(table: str, rows: Set[Any], n: int) -> str:
    shown = sorted(rows, key=repr)[:5]
    return "%s: %s %s disagree%s with all %d of its indexes, which agree with each other: the table's " \
           "copy is older than its indexes (a lost write)" % (
               table, "rowid" if len(rows) == 1 else "rowids", ", ".join(str(r) for r in shown),
               "s" if len(rows) == 1 else "", n)


def index_reason(table: str, iname: str, i: Dict[str, Any]) -> str:
    """What a dishonest index lacks and holds in excess, by rowid; equal counts never read as a finding."""
    def rows(key: str) -> str:
        shown = i.get(key + "_rows") or []
        n = i.get(key) or 0
        return "%d (%s %s%s)" % (n, "rowid" if n == 1 else "rowids", ", ".join(str(r) for r in shown),
                                 ", ..." if n > len(shown) else "") if n else "0"
    if i.get("error"):
        return "%s: unreadable through the index (%s rows of %s by table scan): %s" % (
            iname, i["expected"], table, i["error"])
    lacks, excess = i.get("lacks") or 0, i.get("excess") or 0
    if not lacks and not excess:
        return "%s: %s entries, %s rows of %s; they differ" % (iname, i["entries"], i["expected"], table)
    same = set(i.get("lacks_rows") or []) & set(i.get("excess_rows") or [])
    return "%s: %s entries for %s rows of %s: lacks %s, holds %s in excess%s" % (
        iname, i["entries"], i["expected"], table, rows("lacks"), rows("excess"),
        "; %d entries disagree with their row's values" % len(same) if same else "")


def errors_by_object(rec: Dict[str, Any]) -> Dict[str, int]:
    """{object: count} over every finding: integrity lines, duplicated rows, dishonest indexes, FK, FTS checks."""
    out: Dict[str, int] = {}

    def add(name: str, n: int) -> None:
        out[name] = out.get(name, 0) + int(n)

    integ = rec.get("integrity") or {}
    for name, g in (integ.get("by_object") or {}).items():
        add(name, g["count"])
    for name, g in ((integ.get("fallback") or {}).get("by_object") or {}).items():
        if name not in (integ.get("by_object") or {}):
            add(name, g["count"])
    for t, h in (rec.get("honesty") or {}).items():
        if h["duplicates"]:
            add(t, h["duplicates"])
        if h["errors"]:
            add(t, len(h["errors"]))
        for iname, i in h["indexes"].items():
            if i.get("ok") is False and iname not in (integ.get("by_object") or {}):
                add(iname, (i.get("lacks") or 0) + (i.get("excess") or 0) or 1)
    for t, n in ((rec.get("foreign_keys") or {}).get("by_table") or {}).items():
        add(t, n)
    for name, f in (rec.get("fts") or {}).items():
        if f.get("errors") and name not in out and not any(
                n.startswith(name + "_") for n in out):
            add(name, len(f["errors"]))
    return out


def base_tables_fail(integ: Optional[Dict[str, Any]], honesty: Dict[str, Dict[str, Any]]) -> Optional[str]:
    """Why the base tables are already known damaged (the store is structurally corrupt
    whatever its FTS indexes hold), or None."""
    _, conds, reasons = classify({"integrity": integ, "honesty": honesty, "holders": None})
    return reasons[0] if "structural_corruption" in conds else None


def add_warnings(rec: Dict[str, Any], opts: Dict[str, Any], tooling: Dict[str, Any]) -> None:
    """Warnings never change the verdict: no recent verified backup, big WAL, unknown holders, low space."""
    w = rec["warnings"]
    files = rec.get("files") or {}
    if rec["holders"] and rec["holders"].get("retired") and "retired_wal" not in rec["conditions"]:
        rec["conditions"].insert(0, "retired_wal")
    if rec["verdict"] in ("healthy", "fts_index_damage", "index_damage", "structural_corruption") \
            and "retired_wal" in rec["conditions"]:
        rec["verdict"] = "retired_wal"
    if rec["verdict"] == "missing":
        return
    b = rec.get("backups") or {}
    nv = b.get("newest_verified")
    max_age = opts["backup_max_age_hours"]
    if nv is None:
        w.append({"code": "no_verified_backup", "msg": "no verified backup found"})
    elif nv["age_hours"] > max_age:
        w.append({"code": "no_verified_backup", "msg": "newest verified backup is %.1f h old (> %g h)"
                  % (nv["age_hours"], max_age)})
    wal = (files.get("wal") or {}).get("size") or 0
    if wal > opts["wal_warn_mb"] * 1024 * 1024:
        w.append({"code": "wal_large", "msg": "WAL is %.1f MB (> %g MB): a checkpoint is not keeping up"
                  % (wal / 1048576.0, opts["wal_warn_mb"])})
        if ((rec.get("sqlite") or {}).get("synchronous")) == "NORMAL":
            w.append({"code": "wal_sync_normal", "msg": "WAL with synchronous=NORMAL (this host's default): "
                      "the last %.1f MB of commits do not survive a power loss" % (wal / 1048576.0)})
    h = rec.get("holders")
    if h is not None and h.get("status") != "known":
        w.append({"code": "holders_unknown", "msg": "holders unknown: %s" % (h.get("reason") or "")})
    size = ((files.get("db") or {}).get("size") or 0) + wal
    free = files.get("free_bytes")
    if free is not None and size and free < 2 * size:
        w.append({"code": "low_free_space", "msg": "%.1f MB free, under twice the database (%.1f MB)"
                  % (free / 1048576.0, size / 1048576.0)})
    if (rec.get("journal") or {}).get("warning"):
        w.append({"code": "wal_reset_bug", "msg": rec["journal"]["warning"]})
    gp = rec.get("gateway_pid")
    if gp and gp.get("state", "").startswith("stale"):
        w.append({"code": "gateway_pid_stale", "msg": "gateway.pid: %s" % gp["state"]})
    for name, f in (rec.get("fts") or {}).items():
        if not f.get("checked") and f.get("reason"):
            w.append({"code": "fts_unchecked", "msg": "%s: %s" % (name, f["reason"])})


def worst(verdicts: Iterable[str]) -> Optional[str]:
    listed = list(verdicts)
    return max(listed, key=lambda v: SEVERITY.get(v, 6)) if listed else None
