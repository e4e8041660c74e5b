"""The audit's read-only FTS5 checks, as units sqlite.workers can run side by side.

FTS5's own 'integrity-check' is an INSERT and fails on a read-only handle. Where the host's
SQLite runs it inside quick_check (3.44+ calls each virtual table's xIntegrity; found by asking,
see quick_check_covers_fts5), quick_check's lines are the evidence and the index is not walked
again. Elsewhere each FTS table is checked by walking its whole inverted index through an
fts5vocab table in the connection's TEMP schema (never the file), cut into term ranges that run
on several connections, comparing the token total with the per-row counts in *_docsize and the
row counts of *_content. A MATCH probe runs on both. Stdlib only, Python 3.8+.
"""
from __future__ import annotations

import sqlite3
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.fileformat.record import read_varint
from fleetops.remote.sqlite import workers as sqlite_workers
from fleetops.remote.hermes.audit_schema import FtsSpecs, Objs

Records = Dict[str, Dict[str, Any]]     # each FTS table's record, by name
TermRange = Optional[Tuple[Optional[str], Optional[str]]]    # [lo, hi) of terms; None: all of them


def qi(name: object) -> str:
    """Quote an SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def count(conn: sqlite3.Connection, sql: str) -> Any:
    return conn.execute(sql).fetchone()[0]


def failure(exc: BaseException) -> str:
    return "%s: %s" % (type(exc).__name__, exc)


def _docsize_tokens(blob: Optional[bytes]) -> int:
    """Tokens one *_docsize row counts: the sum of its varints (one per column)."""
    total, off, n = 0, 0, len(blob or b"")
    while off < n:
        v, off = read_varint(blob, off)
        total += v
    return total


SHADOW_SUFFIXES = ("_data", "_idx", "_content", "_docsize", "_config")
_COVERS: Dict[str, bool] = {}


def quick_check_covers_fts5() -> bool:
    """True when this SQLite's quick_check runs FTS5's own integrity check: a scratch in-memory
    FTS5 table loses a *_docsize row and quick_check is asked whether it noticed (a version
    number would not say how this build was made)."""
    if "covers" not in _COVERS:
        mem = sqlite3.connect(":memory:")
        try:
            mem.execute("CREATE VIRTUAL TABLE f USING fts5(x)")
            mem.execute("INSERT INTO f VALUES ('fleetops probe')")
            mem.commit()
            mem.execute("DELETE FROM f_docsize")
            mem.commit()
            _COVERS["covers"] = mem.execute("PRAGMA quick_check").fetchall() != [("ok",)]
        except sqlite3.Error:
            _COVERS["covers"] = False
        finally:
            mem.close()
    return _COVERS["covers"]


def fts_record(spec: Dict[str, Any]) -> Dict[str, Any]:
    return {"module": spec["module"], "tokenizer": spec["tokenizer"], "checked": False, "ok": None,
            "errors": [], "index_tokens": None, "docsize_tokens": None, "docsize_rows": None,
            "content_rows": None, "terms": None, "probe": None}


def fts_unchecked(spec: Dict[str, Any], tooling: Dict[str, Any]) -> Optional[str]:
    """Why this host cannot check an FTS table at all, or None."""
    if spec["module"] != "fts5":
        return "%s tables are not checked (Hermes uses fts5)" % spec["module"]
    if not tooling.get("fts5"):
        return "host SQLite %s has no FTS5: cannot check" % sqlite3.sqlite_version
    if spec["tokenizer"] == "trigram" and not tooling.get("trigram"):
        return ("host SQLite %s has no trigram tokenizer (needs 3.34+): the table cannot be opened "
                "here; only its shadow b-trees were checked" % sqlite3.sqlite_version)
    return None


def fts_prepare(worker: sqlite_workers.Worker, fts: FtsSpecs, records: Records) -> None:
    """An fts5vocab table over each checked FTS table in this worker connection's TEMP schema
    (never the file), made before the connection runs any check; FTS5's refusal is kept."""
    for n, name in enumerate(sorted(fts)):
        if not records[name]["checked"]:
            continue
        vocab = "temp.%s" % qi("fleetops_vocab_%d" % n)
        try:
            worker.conn.execute("CREATE VIRTUAL TABLE %s USING fts5vocab('main', %s, 'row')"
                                % (vocab, "'" + name.replace("'", "''") + "'"))
            worker.cache[("vocab", name)] = vocab
        except sqlite3.Error as exc:
            worker.cache[("vocab", name)] = exc


def fts_vocab(worker: sqlite_workers.Worker, name: str, n: int) -> str:
    """The name of this connection's fts5vocab table over `name`; raises FTS5's refusal."""
    vocab = worker.cache[("vocab", name)]
    if isinstance(vocab, Exception):
        raise vocab
    return vocab


def fts_term_ranges(conn: sqlite3.Connection, name: str, pieces: int) -> List[TermRange]:
    """Term ranges that split `name`'s index walk into about `pieces` parts of similar size, cut
    at the first terms of its leaf pages in *_idx (main index terms start with "0"); [None]
    (one range: everything) when it cannot be split."""
    if pieces <= 1:
        return [None]
    try:
        rows = conn.execute("SELECT term FROM %s NOT INDEXED" % qi(name + "_idx")).fetchall()
    except sqlite3.Error:
        return [None]
    found: Set[str] = set()
    for (t,) in rows:
        if isinstance(t, bytes) and t[:1] == b"0" and len(t) > 1:
            try:
                found.add(t[1:].decode("utf-8"))
            except UnicodeDecodeError:
                continue
    terms = sorted(found)
    if len(terms) < 4 * pieces:
        return [None]
    cuts = sorted(set(terms[len(terms) * i // pieces] for i in range(1, pieces)))
    bounds: List[Optional[str]] = [None] + cuts
    return [(bounds[i], bounds[i + 1] if i + 1 < len(bounds) else None) for i in range(len(bounds))]


def fts_walk(worker: sqlite_workers.Worker, name: str, n: int, term_range: TermRange) -> Tuple[int, Optional[int]]:
    """(terms, tokens) of one term range of the index (None: all of it), walking every doclist."""
    vocab = fts_vocab(worker, name, n)
    where: List[str] = []
    args: List[str] = []
    if term_range is not None:
        lo, hi = term_range
        if lo is not None:
            where.append("term >= ?")
            args.append(lo)
        if hi is not None:
            where.append("term < ?")
            args.append(hi)
    sql = "SELECT count(*), sum(cnt) FROM %s" % vocab + (" WHERE " + " AND ".join(where) if where else "")
    return worker.conn.execute(sql, args).fetchone()


def fts_docsize(conn: sqlite3.Connection, name: str) -> Tuple[int, int]:
    rows = 0
    tokens = 0
    for (sz,) in conn.execute("SELECT sz FROM %s NOT INDEXED" % qi(name + "_docsize")):
        rows += 1
        tokens += _docsize_tokens(sz)
    return rows, tokens


def _attempt(fn: Callable[..., Any], *args: Any) -> Tuple[str, Any]:
    """("ok", value) or ("error", message): a unit's SQLite or format error becomes evidence."""
    try:
        return ("ok", fn(*args))
    except (sqlite3.Error, FormatError) as exc:
        return ("error", failure(exc))


def fts_units(objs: Objs, fts: FtsSpecs, tooling: Dict[str, Any], walk_skipped: Optional[str], pieces: int,
              skip: Callable[[], Optional[str]], covered: bool = False) -> Tuple[Records, List[sqlite_workers.Unit]]:
    """(records, units) for every FTS table: the index walk (split into `pieces` term ranges),
    the *_docsize and *_content scans and the MATCH probe, each a unit of its own; fts_finish
    combines them. `walk_skipped`, when set, is why the walks do not run (the budget);
    `covered`: quick_check runs FTS5's own integrity check, so neither the walk nor the
    *_docsize comparison runs."""
    records: Records = {}
    units: List[sqlite_workers.Unit] = []
    for n, (name, spec) in enumerate(sorted(fts.items())):
        rec = fts_record(spec)
        records[name] = rec
        why = fts_unchecked(spec, tooling)
        if why:
            rec["reason"] = why
            continue
        rec["checked"] = True
        check = "fts:" + name
        units.append(sqlite_workers.Unit(check + ":vocab", check,
                                         lambda w, name=name, n=n: _attempt(fts_vocab, w, name, n), skip=skip))
        if covered:
            rec["checked_by"] = ("quick_check: SQLite %s runs FTS5's own integrity check in it"
                                 % sqlite3.sqlite_version)
        elif walk_skipped:
            rec["walk_skipped"] = walk_skipped
        else:
            ranges = sqlite_workers.Unit(check + ":ranges", check,
                                         lambda w, name=name: fts_term_ranges(w.conn, name, pieces), skip=skip)
            units.append(ranges)
            for i in range(max(1, pieces)):
                def walk(w, name=name, n=n, i=i, ranges=ranges):
                    if i >= len(ranges.result or ()):
                        return None
                    return _attempt(fts_walk, w, name, n, ranges.result[i])
                units.append(sqlite_workers.Unit("%s:walk:%d" % (check, i), check, walk,
                                                 deps=(ranges.name,), skip=skip))
        if spec["columnsize"] and (name + "_docsize") in objs and not covered:
            units.append(sqlite_workers.Unit(check + ":docsize", check,
                                             lambda w, name=name: _attempt(fts_docsize, w.conn, name), skip=skip))
        if (name + "_content") in objs:
            units.append(sqlite_workers.Unit(check + ":content", check, lambda w, name=name: _attempt(
                count, w.conn, "SELECT count(*) FROM %s NOT INDEXED" % qi(name + "_content")), skip=skip))

        def probe(w, name=name, n=n):
            try:
                vocab = fts_vocab(w, name, n)
            except sqlite3.Error as exc:
                return None, ["fts5vocab: " + failure(exc)]
            holder = {"errors": []}
            return match_probe(w.conn, name, vocab, holder), holder["errors"]
        units.append(sqlite_workers.Unit(check + ":probe", check, probe, skip=skip))
    return records, units


def fts_finish(records: Records, fts: FtsSpecs, units: Dict[str, sqlite_workers.Unit],
               integ: Optional[Dict[str, Any]]) -> Records:
    """Fill each checked FTS record from its units' results, errors in the order one pass over
    the table would meet them: the index walk, *_docsize, *_content, the two comparisons, the probe.
    Where quick_check did the FTS5 check, its lines about the table (already in the verdict as
    integrity errors) decide `ok`; a quick_check that stopped early leaves the table unchecked."""
    for name, rec in records.items():
        if not rec["checked"]:
            continue
        if rec.get("checked_by"):
            integ = integ or {}
            if integ.get("capped") or integ.get("aborted"):
                rec.update(checked=False, checked_by=None, quick_check_stopped=True,
                           reason="quick_check stopped before FTS5's own check (%s): not checked"
                           % ("capped" if integ.get("capped") else integ["aborted"]))
                continue
            own = set([name] + [name + s for s in SHADOW_SUFFIXES])
            rec["quick_check_errors"] = sum(g["count"] for o, g in (integ.get("by_object") or {}).items()
                                            if o in own)
        spec = fts[name]
        check = "fts:" + name
        got = dict((u.name[len(check) + 1:], u) for u in units.values() if u.check == check)
        vocab = got["vocab"].result
        if vocab and vocab[0] == "error":
            rec["errors"].append("fts5vocab: %s" % vocab[1])
            rec["ok"] = False
            continue
        walks = [got[k].result for k in sorted(k for k in got if k.startswith("walk:")) if got[k].result]
        if walks:
            failed = [r[1] for r in walks if r[0] == "error"]
            if failed:
                rec["errors"].append("index walk: %s" % failed[0])
            else:
                rec["terms"] = sum(r[1][0] for r in walks)
                rec["index_tokens"] = sum(r[1][1] or 0 for r in walks)
        for key, field in (("docsize", None), ("content", "content_rows")):
            res = got[key].result if key in got else None
            if res is None:
                continue
            if res[0] == "error":
                rec["errors"].append("%s: %s" % (key, res[1]))
            elif field:
                rec[field] = res[1]
            else:
                rec["docsize_rows"], rec["docsize_tokens"] = res[1]
        if (spec["detail"] == "full" and rec["index_tokens"] is not None
                and rec["docsize_tokens"] is not None and rec["index_tokens"] != rec["docsize_tokens"]):
            rec["errors"].append("index holds %d tokens, %s_docsize counts %d"
                                 % (rec["index_tokens"], name, rec["docsize_tokens"]))
        if (rec["content_rows"] is not None and rec["docsize_rows"] is not None
                and rec["content_rows"] != rec["docsize_rows"]):
            rec["errors"].append("%s_content has %d rows, %s_docsize %d"
                                 % (name, rec["content_rows"], name, rec["docsize_rows"]))
        if got["probe"].result is not None:
            rec["probe"], errors = got["probe"].result
            rec["errors"].extend(errors)
        rec["ok"] = not rec["errors"] and not rec.get("quick_check_errors")
    return records


def match_probe(conn: sqlite3.Connection, name: str, vocab: str, rec: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """A term the index says exists must be found by MATCH."""
    try:
        row = conn.execute("SELECT term FROM %s WHERE doc > 0 LIMIT 1" % vocab).fetchone()
    except sqlite3.Error as exc:
        rec["errors"].append("probe term: %s: %s" % (type(exc).__name__, exc))
        return None
    if row is None:
        return {"term": None, "rows": 0, "note": "empty index"}
    term = row[0]
    try:
        hits = conn.execute("SELECT count(*) FROM (SELECT rowid FROM %s WHERE %s MATCH ? LIMIT 5)"
                            % (qi(name), qi(name)), ('"%s"' % str(term).replace('"', '""'),)).fetchone()[0]
    except sqlite3.Error as exc:
        rec["errors"].append("MATCH probe: %s: %s" % (type(exc).__name__, exc))
        return {"term": term, "rows": None}
    if hits == 0:
        rec["errors"].append("MATCH %r found no row although the index lists it" % term)
    return {"term": term, "rows": hits}
