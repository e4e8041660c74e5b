"""Salvage every readable row of a damaged SQLite store (Hermes state.db) into a new file.

Why two layers: SQLite's own table walk (seeks by rowid, NOT INDEXED) reads what its
b-trees still reach, fast and exactly as Hermes would; the pure-Python page scan
(fleetops.remote.sqlite.fileformat) finds leaf pages the walk cannot reach. Every row found
is either saved, dropped as an exact duplicate, or written to the quarantine file with a
reason, and the report's counts come from table scans and page scans, never an index.

FTS tables (fts=rebuild) are built once the rows are final: each is filled by the source's
own triggers in a private scratch database (one INSERT .. SELECT of the salvaged rows; several
tables at once on several cores; a build started early from the image is kept only when the
final rows prove identical to what it read), copied as it is into the output with its
triggers, and checked there. Where that cannot be prepared, the FTS tables and triggers are
created before the rows and index them one by one as they go in.

Stdlib only, Python 3.8+ (host payload); `main(args)` is the payload entry point.
The source is never written: it is read through an immutable read-only URI, or through a
private copy when a WAL has to be applied first.
"""
import base64
import bisect
import concurrent.futures
import json
import mmap
import os
import re
import shutil
import sqlite3
import tempfile
import threading
import time
import urllib.parse

from fleetops.remote.hermes import schemas as hermes_schemas
from fleetops.remote.sqlite import fileformat as sf
from fleetops.remote.host.durable import fsync_dir, fsync_file, sha256_file

BATCH = 500
# FTS build (fts=rebuild). "scratch": after the rows are final, each FTS table is filled by
# its own triggers (the source's DDL) in a private scratch database, one INSERT .. SELECT of
# the salvaged rows, several tables at once on several cores; its shadow tables are then
# copied as they are into the output and the triggers created. "triggers": the FTS tables and
# their triggers exist before the rows go in (one trigger firing per inserted row): the
# fallback, used when the scratch build cannot be prepared.
FTS_BUILD_MODES = ("scratch", "triggers")
# FTS5 settings used only while a scratch index is built, then the _config rows are put back
# exactly as the freshly created table had them: no automatic merging during the bulk load
# (crisis merges still bound the segment count), which cuts the trigram build by a third.
FTS5_BUILD_CONFIG = (("automerge", 0),)
FTS_SHADOW_SUFFIXES = ("data", "idx", "content", "docsize", "config",
                       "segments", "segdir", "stat")
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


class SalvageInputError(Exception):
    """The arguments or the source cannot be used at all (CLI exit 4)."""


class SalvageError(Exception):
    """The salvage itself failed part way (CLI exit 2); no output and no temporary file left."""


# ---------------------------------------------------------------- helpers

def _q(name):
    return '"' + name.replace('"', '""') + '"'


def _uri(path, **params):
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + "?" + "&".join(
        "%s=%s" % kv for kv in params.items())


def _affinity(decl):
    """SQLite column affinity from a declared type (the five rules of datatype3.html)."""
    d = (decl or "").upper()
    if "INT" in d:
        return "INTEGER"
    if "CHAR" in d or "CLOB" in d or "TEXT" in d:
        return "TEXT"
    if "BLOB" in d or not d:
        return "BLOB"
    if "REAL" in d or "FLOA" in d or "DOUB" in d:
        return "REAL"
    return "NUMERIC"


def _one(conn, sql, params=()):
    """First row or None, with the statement finished (an unfinished one blocks checkpoints)."""
    rows = conn.execute(sql, params).fetchall()
    return rows[0] if rows else None


def _jsonable(v):
    if isinstance(v, sf.InvalidText):
        return {"$text_invalid_utf8_hex": bytes(v).hex()}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"$blob_b64": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return {"$text_surrogates": v.encode("utf-8", "surrogatepass").hex()}
    return v


def _content_key(values):
    """Hashable identity of a row's content, type-exact: 1 != 1.0 != '1' != b'1', and
    0.0 != -0.0 (floats compared by their bits, so a NaN equals itself)."""
    types = tuple(map(type, values))
    if float in types:
        values = [v.hex() if t is float else v for v, t in zip(values, types)]
    return types, tuple(values)


def _file_fingerprints(path):
    out = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = path + suffix
        if os.path.exists(p):
            st = os.stat(p)
            out[suffix or "db"] = {"path": p, "size": st.st_size, "sha256": sha256_file(p),
                                   "mtime_ns": st.st_mtime_ns}
    return out


# ---------------------------------------------------------------- schema model

class Table(object):
    """One table of the schema, with what salvage needs to know about its columns."""

    def __init__(self, name, sql, rootpage):
        self.name = name
        self.sql = sql
        self.rootpage = rootpage
        self.columns = []        # names of stored columns, in record order
        self.decl = []
        self.affinity = []
        self.notnull = []
        self.defaults = []       # evaluated default values
        self.alias = None        # index of the INTEGER PRIMARY KEY column
        self.without_rowid = bool(sql and re.search(r"WITHOUT\s+ROWID\s*;?\s*$", sql, re.I))
        self.virtual = bool(sql and re.match(r"\s*CREATE\s+VIRTUAL\s+TABLE", sql, re.I))
        self.shadow_of = None
        self.autoincrement = bool(sql and re.search(r"AUTOINCREMENT", sql, re.I))

    @property
    def internal(self):
        return self.name.lower().startswith("sqlite_")

    @property
    def target(self):
        """Tables whose rows salvage copies."""
        return not (self.virtual or self.shadow_of or self.internal)


def _load_schema_rows(conn):
    return [dict(zip(("type", "name", "tbl_name", "rootpage", "sql"), r)) for r in conn.execute(
        "SELECT type, name, tbl_name, rootpage, sql FROM sqlite_schema")]


def _build_model(schema_rows):
    """Tables with column info, taken from an in-memory replay of the DDL (no hand parsing)."""
    mem = sqlite3.connect(":memory:")
    tables = {}
    problems = []
    for r in schema_rows:
        if r["type"] != "table" or not r["sql"]:
            continue
        t = Table(r["name"], r["sql"], r["rootpage"])
        tables[t.name] = t
        if t.internal or t.virtual:
            continue
        try:
            mem.execute(r["sql"])
        except sqlite3.Error as e:
            problems.append("cannot replay DDL of %s: %s" % (t.name, e))
    virtual = [t.name for t in tables.values() if t.virtual]
    for t in tables.values():
        for v in virtual:
            for suf in FTS_SHADOW_SUFFIXES:
                if t.name == "%s_%s" % (v, suf):
                    t.shadow_of = v
    for t in tables.values():
        if t.virtual or t.internal:
            if t.name == "sqlite_sequence":
                t.columns, t.decl = ["name", "seq"], ["", ""]
            elif t.name.startswith("sqlite_stat"):
                t.columns, t.decl = ["tbl", "idx", "stat"], ["", "", ""]
            t.affinity = [_affinity(d) for d in t.decl]
            t.notnull = [False] * len(t.columns)
            t.defaults = [None] * len(t.columns)
            continue
        try:
            info = mem.execute("PRAGMA table_xinfo(%s)" % _q(t.name)).fetchall()
        except sqlite3.Error:
            info = []
        pks = [c for c in info if c[5]]
        for cid, name, decl, notnull, dflt, pk, hidden in info:
            if hidden in (2, 3):       # generated columns: not inserted
                continue
            t.columns.append(name)
            t.decl.append(decl or "")
            t.affinity.append(_affinity(decl))
            t.notnull.append(bool(notnull))
            val = None
            if dflt is not None:
                try:
                    val = _one(mem, "SELECT " + dflt)[0]
                except sqlite3.Error:
                    val = None
            t.defaults.append(val)
            if (pk and len(pks) == 1 and (decl or "").upper() == "INTEGER"
                    and not t.without_rowid):
                t.alias = len(t.columns) - 1
    mem.close()
    return tables, problems


# ---------------------------------------------------------------- shape matching

def _shape_score(table, values):
    """How well a decoded record fits a table; None if it cannot belong to it."""
    n = len(values)
    if not table.columns or n > len(table.columns) or n == 0:
        return None
    score = 2 if n == len(table.columns) else 0
    for i, v in enumerate(values):
        aff = table.affinity[i]
        if table.alias == i:
            if v is not None:
                return None
            score += 2
            continue
        if v is None:
            if table.notnull[i]:
                score -= 1
            continue
        if aff == "TEXT":
            if isinstance(v, (int, float)):
                return None
            score += 2 if isinstance(v, str) else 0
        elif aff == "INTEGER":
            score += 2 if isinstance(v, int) else (0 if isinstance(v, float) else -1)
        elif aff == "REAL":
            score += 2 if isinstance(v, (int, float)) else -1
        elif aff == "NUMERIC":
            score += 1 if isinstance(v, (int, float)) else 0
        elif "BLOB" in table.decl[i].upper():
            score += 2 if isinstance(v, bytes) else 0
        else:
            score += 1
    return score


def _assign_page(tables, records):
    """Pick the one table a leaf page belongs to by summed record shape.

    Returns (name, None, []) or (None, why, names tied for first place)."""
    totals = {}
    for t in tables:
        s = 0
        ok = 0
        for vals in records:
            sc = _shape_score(t, vals)
            if sc is not None:
                s += sc
                ok += 1
        if ok and ok * 2 >= len(records):
            totals[t.name] = (ok, s)
    if not totals:
        return None, "no table fits the records", []
    ranked = sorted(totals.items(), key=lambda kv: kv[1], reverse=True)
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        tied = [n for n, v in ranked if v == ranked[0][1]]
        return None, "ambiguous between %s" % " and ".join(tied), tied
    return ranked[0][0], None, []


# ---------------------------------------------------------------- suspect content

_NUMERIC_TEXT = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
NUL_RUN = 8


def _affinity_doubts(t, values):
    """Why a record cannot have been written as it reads, for this table: a value whose
    storage class the column's affinity would have converted (a number in a TEXT column,
    numeric text in an INTEGER/REAL/NUMERIC one), or a run of NUL characters in text (what a
    zeroed page leaves inside a value; Hermes never writes them)."""
    out = []
    for i, v in enumerate(values[:len(t.columns)]):
        if v is None or i == t.alias:
            continue
        aff = t.affinity[i]
        col = t.columns[i]
        if aff == "TEXT" and isinstance(v, (int, float)):
            out.append("%s: a %s in a TEXT column" % (col, type(v).__name__))
        elif aff in ("INTEGER", "REAL", "NUMERIC") and isinstance(v, str) and _NUMERIC_TEXT.match(v):
            out.append("%s: numeric text in a %s column" % (col, aff))
        elif aff == "INTEGER" and isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 63:
            out.append("%s: an integral REAL in an INTEGER column" % col)
        if isinstance(v, (str, bytes)) and not (isinstance(v, bytes) and not isinstance(v, sf.InvalidText)):
            nul = "\x00" * NUL_RUN if isinstance(v, str) else b"\x00" * NUL_RUN
            if nul in v:
                out.append("%s: a run of NUL characters in text" % col)
    return out


# ---------------------------------------------------------------- row bookkeeping

class Version(object):
    """One distinct content seen for one key, and every place it was seen."""

    __slots__ = ("values", "walk", "cells", "first_page", "lineage", "suspect")

    def __init__(self, values):
        self.values = values
        self.walk = False
        self.cells = set()
        self.first_page = None
        self.lineage = False     # seen on a leaf of the table's own tree
        self.suspect = []        # why its content may have changed although it decodes

    @property
    def instances(self):
        return max(len(self.cells), 1 if self.walk else 0)


class TableState(object):
    """Everything found for one target table."""

    def __init__(self, table):
        self.t = table
        self.keys = {}           # rowid -> {content_key: Version}
        self.bad_pages = {}
        self.bad_cells = []
        self.walk_bad_ranges = []
        self.walk_errors = []
        self.double_refs = []
        self.orphan_pages = []
        self.freelist_records = 0
        self.repaired = []
        self.quarantined = 0
        self.quarantine_reasons = {}
        self.undecodable = 0
        self.held_back = {}      # reason -> rows of orphan pages not restored
        self.foreign_cells = {}  # rowid -> {content key: page} of another table's leaf its walk read
        self.foreign_read = 0
        self.invalid_text = []   # rowids saved with text that is not valid UTF-8
        self.suspect = {}        # rowid saved -> why its content is in doubt

    def add(self, rowid, values, walk=False, cell=None, lineage=False):
        versions = self.keys.setdefault(rowid, {})
        ck = _content_key(values)
        v = versions.get(ck)
        if v is None:
            v = versions[ck] = Version(values)
        if walk:
            v.walk = True
        if lineage:
            v.lineage = True
        if cell is not None:
            v.cells.add(cell)
            if v.first_page is None or cell[0] < v.first_page:
                v.first_page = cell[0]
        return v


def _normalize(t, rowid, values):
    """A page-scan record as SQLite would return it: defaults for short records,
    the rowid in the INTEGER PRIMARY KEY column, REAL affinity ints as floats."""
    vals = list(values[:len(t.columns)])
    if len(vals) < len(t.columns):
        vals.extend(t.defaults[len(vals):])
    if t.alias is not None:
        vals[t.alias] = rowid
    for i, aff in enumerate(t.affinity):
        if aff == "REAL" and isinstance(vals[i], int) and i != t.alias:
            vals[i] = float(vals[i])
    return vals


# ---------------------------------------------------------------- repair rules

def _repair_sessions_started_at(out, row):
    """sessions.started_at NULL -> the session's first message timestamp,
    else the smallest started_at of its neighbouring sessions (by rowid)."""
    rowid, vals, cols = row
    sid = vals[cols.index("id")] if "id" in cols else None
    if sid is not None:
        try:
            v = _one(out, "SELECT min(timestamp) FROM messages WHERE session_id = ?",
                            (sid,))[0]
            if v is not None:
                return v, "first message timestamp of the session"
        except sqlite3.Error:
            pass
    cands = []
    for op, order in (("<", "DESC"), (">", "ASC")):
        r = _one(out, "SELECT started_at FROM sessions WHERE rowid %s ? AND started_at IS NOT NULL "
                        "ORDER BY rowid %s LIMIT 1" % (op, order), (rowid,))
        if r:
            cands.append(r[0])
    if cands:
        return min(cands), "minimum started_at of the neighbouring sessions"
    return None, None


def _repair_messages_timestamp(out, row):
    """messages.timestamp NULL -> the previous message's timestamp in the same session,
    else the next one's, else the session's started_at."""
    rowid, vals, cols = row
    sid = vals[cols.index("session_id")] if "session_id" in cols else None
    if sid is None:
        return None, None
    for op, order, why in (("<", "DESC", "previous message timestamp in the session"),
                           (">", "ASC", "next message timestamp in the session")):
        r = _one(out, "SELECT timestamp FROM messages WHERE session_id = ? AND id %s ? AND "
                        "timestamp IS NOT NULL ORDER BY id %s LIMIT 1" % (op, order),
                        (sid, rowid))
        if r:
            return r[0], why
    try:
        r = _one(out, "SELECT started_at FROM sessions WHERE id = ?", (sid,))
        if r and r[0] is not None:
            return r[0], "started_at of the session"
    except sqlite3.Error:
        pass
    return None, None


REPAIR_RULES = {
    ("sessions", "started_at"): _repair_sessions_started_at,
    ("messages", "timestamp"): _repair_messages_timestamp,
}
REPAIR_ORDER = ["sessions", "messages"]


# ---------------------------------------------------------------- the engine

class Salvage(object):
    """One salvage run; see salvage() for the contract."""

    def __init__(self, source, output, fts="rebuild", schema_from=None,
                 quarantine_freelist=False, report_path=None, batch=BATCH,
                 fts_build="scratch", fts_workers=None, fts_build_config=FTS5_BUILD_CONFIG,
                 fts_speculate=True):
        if fts not in ("rebuild", "leave-to-hermes"):
            raise SalvageInputError("fts must be 'rebuild' or 'leave-to-hermes', not %r" % (fts,))
        if fts_build not in FTS_BUILD_MODES:
            raise SalvageInputError("fts_build must be one of %s, not %r"
                                    % (FTS_BUILD_MODES, fts_build))
        # internal knobs (tests, benchmarks): how FTS tables are built with fts=rebuild,
        # how many at once (None: one per core), FTS5 settings during a scratch build,
        # whether builds may start from the image before the rows are final
        self.fts_build = fts_build
        self.fts_workers = fts_workers
        self.fts_build_config = tuple(fts_build_config or ())
        self.fts_speculate = fts_speculate
        self.fts_jobs = []
        self.fts_spec = {}
        self.fts_spec_state = None
        self.fts_spec_pool = None
        self._scratch_n = 0
        self.source = os.path.abspath(source)
        self.output = os.path.abspath(output)
        self.fts = fts
        self.schema_from = os.path.abspath(schema_from) if schema_from else None
        self.quarantine_freelist = quarantine_freelist
        self.report_path = report_path
        self.batch = batch
        self.quarantine_path = self.output + ".quarantine.jsonl"
        self.qfh = None
        self.q_count = 0
        self.durations = {}
        self.notes = []
        self.tmpdir = None
        self.report = {}
        self.header_inferred = []      # header fields not taken from the source's header
        self.held_back = {"rows": 0, "pages": 0, "by_reason": {}}

    # ------------------------------------------------------------ entry

    def run(self):
        t0 = time.monotonic()
        self._check_inputs()
        before = self._before = _file_fingerprints(self.source)
        try:
            try:
                self._run()
            except SalvageInputError:
                raise
            except Exception as e:  # noqa: BLE001 - every failure is the salvage's, named as such
                self._discard_output()
                self.report["verdict"] = "failed"
                self.report["error"] = "%s: %s" % (type(e).__name__, e)
                raise SalvageError("salvage failed: %s: %s (no output written)"
                                   % (type(e).__name__, e)) from e
        finally:
            if self.fts_spec_state == "running":
                self._stop_speculation("salvage ended before the FTS build")
            if self.fts_spec_pool is not None:
                self.fts_spec_pool.shutdown(wait=True)
            if self.qfh:
                self.qfh.close()
            if self.tmpdir:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
            after = _file_fingerprints(self.source)
            unchanged = all(before[k]["sha256"] == after.get(k, {}).get("sha256")
                            for k in before) and set(before) == set(after)
            self.report["source_unchanged"] = {
                "unchanged": unchanged,
                "before": dict((k, v["sha256"]) for k, v in before.items()),
                "after": dict((k, v["sha256"]) for k, v in after.items())}
            if not unchanged:
                self.report["verdict"] = "failed"
                self.notes.append("source files changed during salvage")
            self.durations["total"] = round(time.monotonic() - t0, 3)
            self.report["durations_s"] = self.durations
            self.report["notes"] = self.notes
            if self.report_path:
                self._write_report()
        return self.report

    def _discard_output(self):
        """Close and remove the temporary output of a failed run (the source is untouched)."""
        out = getattr(self, "out", None)
        if out is not None:
            try:
                out.close()
            except sqlite3.Error:
                pass
        tmp = getattr(self, "tmp_out", None)
        for suffix in ("", "-wal", "-shm", "-journal"):
            if tmp and os.path.exists(tmp + suffix):
                os.unlink(tmp + suffix)

    def _check_inputs(self):
        if not os.path.isfile(self.source):
            raise SalvageInputError("source %s is not a file" % self.source)
        if os.path.exists(self.output):
            raise SalvageInputError("output %s already exists; salvage never overwrites" % self.output)
        if not os.path.isdir(os.path.dirname(self.output)):
            raise SalvageInputError("output directory %s does not exist" % os.path.dirname(self.output))
        if os.path.realpath(self.source) == os.path.realpath(self.output):
            raise SalvageInputError("output must differ from source")
        if self.schema_from and not os.path.isfile(self.schema_from):
            raise SalvageInputError("schema_from %s is not a file" % self.schema_from)
        with open(self.source, "rb") as fh:
            head = fh.read(100)
        self.inferred_header = None
        try:
            sf.parse_header(head)
        except sf.FormatError as e:
            try:
                with open(self.source, "rb") as fh:
                    size = os.fstat(fh.fileno()).st_size
                    mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
                    try:
                        self.inferred_header = sf.infer_header(mm)
                    finally:
                        if size:
                            mm.close()
            except sf.FormatError as e2:
                if not self.schema_from:
                    raise SalvageInputError("source is not a SQLite database (%s) and its header "
                                            "cannot be inferred (%s); a damaged header needs "
                                            "schema_from" % (e, e2))

    def _tick(self, name, t0):
        self.durations[name] = round(time.monotonic() - t0, 3)

    def _run(self):
        r = self.report
        r.update({"source": self.source, "output": self.output, "fts_mode": self.fts,
                  "schema_from": self.schema_from, "verdict": "failed",
                  "quarantine_file": None, "quarantined_total": 0})
        t = time.monotonic()
        image, image_info = self._make_image()
        r["image"] = image_info
        self._tick("image", t)

        t = time.monotonic()
        fallback = None
        if self.schema_from:
            with open(self.schema_from, "rb") as fh:
                fallback = fh.read(100)
        self.reader = _open_reader(image, fallback)
        if getattr(self.reader, "header_from", None) == "schema_from":
            self.header_inferred = ["freelist_trunk", "freelist_count", "header (schema_from's)"]
        r["header"] = self.reader.header.as_dict()
        h = self.reader.header
        if (h.freelist_trunk > self.reader.page_count or h.freelist_count > self.reader.page_count
                ) and "freelist_trunk" not in self.header_inferred:
            # pointing outside the file: not the freelist's, whatever the rest says
            self.header_inferred += ["freelist_trunk", "freelist_count"]
            self.notes.append("header freelist fields point outside the file (trunk %d, count "
                              "%d): free pages found from the pages instead"
                              % (h.freelist_trunk, h.freelist_count))
        r["header_inferred"] = list(self.header_inferred)
        r["source_format"] = self.keep = _source_format(image, self.reader.header, image_info,
                                                        self.header_inferred, fallback)
        if not self.keep["journal_mode_known"]:
            self.notes.append("the source's journal mode is lost with its header (no -wal, no "
                              "schema_from): the output is in DELETE mode")
        self._load_schema(image)
        self._tick("schema", t)
        self._speculate_fts()

        t = time.monotonic()
        self._page_scan()
        self._tick("page_scan", t)

        t = time.monotonic()
        for st in self.states.values():
            self._walk_table(st)
        self._tick("table_walk", t)
        self._speculation_damage_check()

        t = time.monotonic()
        self._write_output()
        self._tick("write", t)

        t = time.monotonic()
        self._verify_and_finish()
        self._tick("verify", t)
        self.reader.close()
        if self.src:
            self.src.close()

    # ------------------------------------------------------------ image

    def _make_image(self):
        """A consistent, private-or-immutable view of the source; never writes it."""
        wal = self.source + "-wal"
        info = {"wal_present": os.path.exists(wal), "wal_applied": None}
        journal = self.source + "-journal"
        if os.path.exists(journal) and os.path.getsize(journal) > 0:
            self.notes.append("a rollback journal is present and was NOT applied "
                              "(immutable read of the main file)")
        has_wal = info["wal_present"] and os.path.getsize(wal) > 0
        if has_wal or self.inferred_header:
            self.tmpdir = tempfile.mkdtemp(prefix="fleetops-salvage-",
                                           dir=os.path.dirname(self.output))
            image = os.path.join(self.tmpdir, "image.db")
            shutil.copyfile(self.source, image)
        if self.inferred_header:
            # the private copy gets the inferred header, so SQLite can read it too
            hdr, fields = self.inferred_header
            with open(image, "r+b") as fh:
                fh.write(hdr)
            self.header_inferred = list(fields)
            info["header_inferred"] = list(fields)
            self.notes.append("damaged file header: inferred %s from the pages (private copy)"
                              % ", ".join(fields))
        if has_wal:
            wal_copy = image + "-wal"
            shutil.copyfile(wal, wal_copy)
            try:
                info["wal_applied"] = sf.apply_wal(image, wal_copy)
            except (OSError, sf.FormatError) as e:
                info["wal_applied"] = {"error": str(e)}
                self.notes.append("WAL could not be applied: %s" % e)
            os.unlink(wal_copy)
            wa = info["wal_applied"]
            if wa.get("torn"):
                self.notes.append("WAL has a torn tail: %d of %d frames after the last commit "
                                  "were ignored, as SQLite would" % (
                                      wa["frames_total"] - wa["frames_committed"]
                                      - wa.get("stale_frames", 0), wa["frames_total"]))
            if wa.get("stale_frames"):
                self.notes.append("WAL holds %d stale frames of an earlier generation after its "
                                  "%d valid ones (left by a WAL restart: normal), ignored"
                                  % (wa["stale_frames"], wa["frames_valid"]))
        if has_wal or self.inferred_header:
            info["copied"] = True
        else:
            image = self.source
            info["copied"] = False
        info["path"] = image
        info["size"] = os.path.getsize(image)
        if not info["copied"] and self._before.get("db", {}).get("size") == info["size"]:
            info["sha256"] = self._before["db"]["sha256"]    # the same file, just hashed
        else:
            info["sha256"] = sha256_file(image)
        return image, info

    # ------------------------------------------------------------ schema

    def _load_schema(self, image):
        self.src = None
        src_rows = None
        err = None
        try:
            self.src = sqlite3.connect(_uri(image, mode="ro", immutable="1"), uri=True)
            src_rows = _load_schema_rows(self.src)
        except sqlite3.Error as e:
            err = str(e)
            if self.src:
                self.src.close()
            self.src = None
        self.report["source_schema_error"] = err
        reader_rows = None
        if src_rows is None:
            reader_rows = self._recover_schema_rows()
        if self.schema_from:
            hc = sqlite3.connect(_uri(self.schema_from, mode="ro"), uri=True)
            try:
                ddl_rows = _load_schema_rows(hc)
            finally:
                hc.close()
            roots = dict((x["name"], x["rootpage"]) for x in (src_rows or reader_rows or []))
            for x in ddl_rows:
                x["rootpage"] = roots.get(x["name"], 0)
            self.schema_rows = ddl_rows
            self.report["schema_source"] = "schema_from"
            if src_rows is None:
                self.notes.append("source schema unreadable by SQLite (%s): DDL from schema_from, "
                                  "%d root pages recovered by the page reader"
                                  % (err, sum(1 for v in roots.values() if v)))
        elif src_rows is not None:
            self.schema_rows = src_rows
            self.report["schema_source"] = "source"
        else:
            added = self._schema_fallback(reader_rows or [])
            if not reader_rows and not added:
                raise SalvageInputError("source schema unreadable (%s) and not recognised as a "
                                        "Hermes version fleetops ships; pass schema_from" % err)
            self.schema_rows = (reader_rows or []) + added
            self.report["schema_source"] = "page-reader"
            self.notes.append("schema read by the page reader after SQLite failed: %s" % err)
        self.tables, problems = _build_model(self.schema_rows)
        self.notes.extend(problems)
        self.states = dict((n, TableState(t)) for n, t in self.tables.items() if t.target)

    def _schema_fallback(self, rows):
        """Schema rows for the objects whose DDL the source lost, from the shipped schema of
        the Hermes version that made it (root pages unknown: their pages are found by the
        page scan). Reported per object; [] when the version cannot be told."""
        version = None
        sv = [r for r in rows if r["name"] == "schema_version" and r.get("rootpage")]
        if sv:
            try:
                w = self.reader.walk_btree(sv[0]["rootpage"])
                vals = [v for pg in w.leaves for _c, v in self.reader.leaf_records(pg) if v]
                if len(vals) == 1 and len(vals[0]) == 1 and isinstance(vals[0][0], int):
                    version = vals[0][0]
            except sf.FormatError:
                pass
        module, how = hermes_schemas.identify(rows, version)
        rep = self.report["schema_fallback"] = {"used": False, "identified_by": how}
        if module is None:
            self.notes.append("no fallback schema for the lost DDL: %s" % how)
            return []
        have = set(r["name"] for r in rows)
        added = [{"type": o[0], "name": o[1], "tbl_name": o[2], "rootpage": 0, "sql": o[3]}
                 for o in module.OBJECTS if o[1] not in have]
        rep.update({"used": bool(added), "hermes_version": module.HERMES_VERSION,
                    "schema_version": module.SCHEMA_VERSION,
                    "objects": [r["name"] for r in added]})
        if added:
            self.notes.append("DDL of %d objects lost with the schema page, taken from the schema "
                              "Hermes %s creates (%s): %s" % (
                                  len(added), module.HERMES_VERSION, how,
                                  ", ".join(r["name"] for r in added)))
        return added

    def _recover_schema_rows(self):
        """sqlite_schema rows when SQLite cannot read them: page 1's tree, then every
        table leaf off the freelist whose records look like schema rows (a damaged
        schema page orphans the others). A name seen with two root pages is dropped."""
        rd = self.reader
        found = {}
        try:
            for r in rd.schema_rows():
                found.setdefault(r["name"], []).append(r)
        except sf.FormatError:
            pass
        fl = rd.freelist()
        skip = set(fl["trunks"]) | set(fl["leaves"])
        for pgno in range(2, rd.page_count + 1):
            if pgno in skip:
                continue
            try:
                if rd.page(pgno)[0] != sf.TABLE_LEAF:
                    continue
                recs = list(rd.leaf_records(pgno))
            except sf.FormatError:
                continue
            for _c, v in recs:
                if (v and len(v) == 5 and v[0] in ("table", "index", "view", "trigger")
                        and isinstance(v[1], str) and isinstance(v[2], str)
                        and isinstance(v[3], int) and v[3] >= 0
                        and (v[4] is None or (isinstance(v[4], str)
                                              and v[4].lstrip().upper().startswith("CREATE")))):
                    found.setdefault(v[1], []).append(
                        {"type": v[0], "name": v[1], "tbl_name": v[2], "rootpage": v[3],
                         "sql": v[4]})
        rows = []
        for name, rs in found.items():
            if len(set(r["rootpage"] for r in rs)) == 1:
                rows.append(rs[0])
            else:
                self.notes.append("schema object %s found with several root pages %s: ignored"
                                  % (name, sorted(set(r["rootpage"] for r in rs))))
        return rows

    # ------------------------------------------------------------ page scan

    def _page_scan(self):
        """Classify every page, decode every table leaf of a target tree or orphaned."""
        roots = {1: "sqlite_schema"}
        for r in self.schema_rows:
            if r.get("rootpage") and r["rootpage"] > 1:
                roots[r["rootpage"]] = r["name"]
        cls = self.reader.classify_pages(roots)
        self.classes = cls
        rd = self.reader
        freelist, self.free_evidence = _free_pages(rd, cls, self.header_inferred)
        self.free_set = freelist
        counts = {}
        for info in cls["pages"].values():
            counts[info["kind"]] = counts.get(info["kind"], 0) + 1
        self.report["pages"] = {"total": rd.page_count, "page_size": rd.page_size,
                                "by_kind": counts,
                                "freelist_errors": cls["freelist"]["errors"]}
        # lineage
        for name, st in self.states.items():
            w = cls["walks"].get(name)
            if w is None:
                continue
            st.bad_pages.update(w.bad_pages)
            st.bad_cells.extend(w.bad_cells)
            st.double_refs.extend(w.double_refs)
            for pgno in w.leaves:
                self._decode_leaf(st, pgno)
        for name, st in self.states.items():
            self._foreign_leaves(st)
        # orphans and freelist leaves, assigned by shape
        candidates = [t for t in self.tables.values() if t.columns and not t.without_rowid
                      and not t.virtual]
        schema_t = Table("sqlite_schema", None, 1)
        schema_t.columns = ["type", "name", "tbl_name", "rootpage", "sql"]
        schema_t.decl = ["text", "text", "text", "int", "text"]
        schema_t.affinity = [_affinity(d) for d in schema_t.decl]
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
        self.report["unreadable_pages_by_tree"] = dict(
            (str(k), v) for k, v in sorted(attributed_bad.items()))
        orphans = [pgno for pgno, info in sorted(cls["pages"].items())
                   if info["owner"] is None and pgno not in attributed_bad
                   and info["kind"] not in ("lock-byte", "ptrmap", "freelist-trunk")]
        # overflow pages hanging off orphaned or freed b-tree pages are not unreadable pages
        chained = set()
        for pgno in orphans:
            if cls["pages"][pgno]["kind"] not in sf.PAGE_TYPE_NAMES.values() and pgno not in freelist:
                continue
            try:
                page = rd.btree_page(pgno)
                for i in range(page.ncells):
                    c = rd.read_cell(page, i, follow_overflow=False)
                    for ov in rd._overflow_page_list(c):
                        if cls["pages"].get(ov, {}).get("owner") is None:
                            chained.add(ov)
            except sf.FormatError:
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
                except sf.FormatError:
                    continue
                if page.type != sf.TABLE_LEAF:
                    continue
            elif info["kind"] != "table-leaf":
                continue   # orphan index or interior pages hold no rows of their own
            recs = []
            try:
                for cell, vals in rd.leaf_records(pgno):
                    recs.append((cell, vals))
            except sf.FormatError as e:
                if not on_fl:
                    unattributed.append({"page": pgno, "kind": info["kind"], "reason": str(e)})
                continue
            good = [v for c, v in recs if v is not None]
            if not good:
                if not on_fl and recs:
                    unattributed.append({"page": pgno, "kind": info["kind"],
                                         "reason": "no decodable record"})
                continue
            tname, why, tied = _assign_page(candidates, good)
            if on_fl:
                fl_records.append((pgno, tname, recs))
                continue
            orphan_assign.append({"page": pgno, "table": tname, "reason": why,
                                  "records": len(recs)})
            if tname in self.states and self._hold_back(pgno, self.states[tname], recs):
                orphan_assign[-1]["held_back"] = True
                continue
            if tname in self.states:
                st = self.states[tname]
                st.orphan_pages.append(pgno)
                self._add_records(st, pgno, recs, shape_check=True)
            elif tname is None and any(n in self.states for n in tied):
                unattributed.append({"page": pgno, "kind": "table-leaf", "reason": why,
                                     "records": len(recs)})
                for c, v in recs:
                    self._quarantine(None, c.rowid, v, "orphan leaf page %d: %s" % (pgno, why),
                                     page=pgno)
        self.unattributed = unattributed
        self.report["orphan_leaf_pages"] = orphan_assign
        self.report["unattributed_pages"] = unattributed
        nfl = 0
        for pgno, tname, recs in fl_records:
            for c, v in recs:
                if v is None and c.rowid is None:
                    continue
                nfl += 1
                if tname in self.states:
                    self.states[tname].freelist_records += 1
                if self.quarantine_freelist:
                    self._quarantine(tname, c.rowid, v, "deleted row on freelist page %d "
                                     "(not restored)%s" % (pgno, "" if v is not None else
                                                           ", undecodable: " + str(c.error)),
                                     page=pgno, count=False, raw=c.payload if v is None else None)
        self.report["freelist"] = {"trunks": len(cls["freelist"]["trunks"]),
                                   "leaves": len(cls["freelist"]["leaves"]),
                                   "records_on_freelist": nfl,
                                   "restored": 0,
                                   "quarantined": nfl if self.quarantine_freelist else 0,
                                   "evidence": self.free_evidence}
        self.report["held_back"] = self.held_back

    def _hold_back(self, pgno, st, recs):
        """True (and the rows quarantined, with the reason) when an orphan leaf may be a
        former page rather than a lost live one: nothing in its table's tree can have lost
        its keys (no unreadable page, no double reference, no foreign leaf over them), or
        the free pages are not all known and no interior page still points at it."""
        keys = [c.rowid for c, v in recs if c.rowid is not None]
        holes = self._holes(st)
        covered = all(any((lo is None or k > lo) and (hi is None or k <= hi)
                          for lo, hi in holes) for k in keys)
        why = None
        if not covered:
            kind = "tree intact"
            why = ("orphan leaf page %d: the tree of %s lost no page over its keys %s..%s; a "
                   "former page (freed or superseded), not restored"
                   % (pgno, st.t.name, min(keys) if keys else None, max(keys) if keys else None))
        elif not self.free_evidence["complete"] and pgno not in self._interior_children():
            kind = "free pages unknown"
            why = ("orphan leaf page %d may be a former free page: the free pages are not all "
                   "known (%s) and no interior page points at it; not restored"
                   % (pgno, "; ".join(self.free_evidence["incomplete_because"]) or "?"))
        if why is None:
            return False
        hb = self.held_back
        hb["pages"] += 1
        hb["rows"] += len(recs)
        hb["by_reason"][kind] = hb["by_reason"].get(kind, 0) + len(recs)
        st.held_back[kind] = st.held_back.get(kind, 0) + len(recs)
        for c, v in recs:
            self._quarantine(st.t.name, c.rowid, v, "held back: " + why, page=pgno, count=False,
                             raw=c.payload if v is None else None)
        return True

    def _holes(self, st):
        """Key ranges (lo exclusive, hi inclusive; None unbounded) where the tree of a table
        may have lost live pages."""
        w = self.classes["walks"].get(st.t.name)
        if w is None or not st.t.rootpage:
            return [(None, None)]           # root unknown: anything may be lost
        out = [(i.get("key_lo"), i.get("key_hi")) for i in w.bad_pages.values()]
        out += [(d.get("key_lo"), d.get("key_hi")) for d in w.double_refs]
        if w.bad_cells:
            out.append((None, None))        # an unreadable interior cell: range unknown
        return out

    def _interior_children(self):
        """Pages some readable, not free, table interior page points at."""
        if getattr(self, "_children", None) is None:
            kids = set()
            for pgno, info in self.classes["pages"].items():
                if info["kind"] != "table-interior" or pgno in self.free_set:
                    continue
                try:
                    kids.update(self.reader.children(self.reader.btree_page(pgno)))
                except sf.FormatError:
                    continue
            self._children = kids
        return self._children

    def _foreign_leaves(self, st):
        """Leaves the tree of st's table points at that another tree owns (or whose keys do
        not fit): by record shape, either the table's own (decoded as its lineage) or the
        other table's, whose records SQLite's walk will return as this table's rows (noted,
        to tell them from this table's own versions of those keys)."""
        w = self.classes["walks"].get(st.t.name)
        if w is None:
            return
        pages = [(d["page"], d.get("first_owner")) for d in w.double_refs
                 if d.get("first_owner") not in (None, st.t.name)]
        pages += [(p, None) for p, i in w.bad_pages.items() if i.get("foreign_leaf")]
        for pgno, other in pages:
            try:
                recs = list(self.reader.leaf_records(pgno))
            except sf.FormatError:
                continue
            good = [v for c, v in recs if v is not None]
            cands = [st.t] + [t for t in self.tables.values()
                              if t.columns and not t.without_rowid and not t.virtual
                              and t.name != st.t.name and (other is None or t.name == other)]
            tname, _why, _tied = _assign_page(cands, good) if good else (None, None, [])
            if tname == st.t.name:
                self._add_records(st, pgno, recs, shape_check=False)
                continue
            for c, v in recs:
                if v is not None and c.rowid is not None:
                    ck = _content_key(_normalize(st.t, c.rowid, v))
                    st.foreign_cells.setdefault(c.rowid, {})[ck] = pgno

    def _decode_leaf(self, st, pgno):
        try:
            recs = list(self.reader.leaf_records(pgno))
        except sf.FormatError as e:
            st.bad_pages[pgno] = {"reason": str(e)}
            return
        self._add_records(st, pgno, recs, shape_check=False)

    def _add_records(self, st, pgno, recs, shape_check):
        t = st.t
        for cell, vals in recs:
            if vals is None:
                st.bad_cells.append({"page": pgno, "cell": cell.index, "rowid": cell.rowid,
                                     "reason": cell.error})
                if cell.rowid is not None:
                    st.undecodable += 1
                    self._quarantine(t.name, cell.rowid, None, "undecodable cell %d on page %d: %s"
                                     % (cell.index, pgno, cell.error), page=pgno,
                                     raw=cell.payload)
                continue
            if shape_check and _shape_score(t, vals) is None:
                st.undecodable += 1
                self._quarantine(t.name, cell.rowid, vals, "record on orphan page %d does not fit "
                                 "table %s" % (pgno, t.name), page=pgno)
                continue
            if len(vals) > len(t.columns):
                st.undecodable += 1
                self._quarantine(t.name, cell.rowid, vals, "record has %d columns, table %d"
                                 % (len(vals), len(t.columns)), page=pgno)
                continue
            v = st.add(cell.rowid, _normalize(t, cell.rowid, vals), cell=(pgno, cell.index),
                       lineage=not shape_check)
            for why in cell.suspect + _affinity_doubts(t, vals):
                if why not in v.suspect:
                    v.suspect.append(why)

    # ------------------------------------------------------------ table walk

    def _walk_table(self, st):
        """Copy a table through SQLite by rowid seeks, skipping damaged key ranges."""
        t = st.t
        if self.src is None or t.without_rowid:
            if t.without_rowid and self.src is not None:
                self._walk_without_rowid(st)
            return
        sql = ("SELECT rowid, * FROM %s NOT INDEXED WHERE rowid > ? ORDER BY rowid LIMIT ?"
               % _q(t.name))
        try:
            probe = self.src.execute("SELECT * FROM %s LIMIT 0" % _q(t.name))
            ncols = len(probe.description)
        except sqlite3.Error as e:
            st.walk_errors.append("table unreadable by SQLite: %s" % e)
            return
        if ncols != len(t.columns):
            st.walk_errors.append("SQLite returns %d columns, schema model %d" % (ncols, len(t.columns)))
            return
        known = sorted(st.keys)
        sql_ge = sql.replace("rowid > ?", "rowid >= ?")
        last = None              # largest rowid read so far (None: start of the table)
        floor = None             # keys up to here are known to fail
        resumed = None
        seen_walk = set()
        while True:
            got = 0
            err = None
            hi = last
            try:
                cur = (self.src.execute(sql_ge, (INT64_MIN, self.batch)) if last is None
                       else self.src.execute(sql, (last, self.batch)))
                for row in cur:
                    got += 1
                    rid = row[0]
                    v = st.add(rid, list(row[1:]), walk=True)
                    if not v.cells:
                        for why in _affinity_doubts(t, v.values):
                            if why not in v.suspect:
                                v.suspect.append(why)
                    seen_walk.add(rid)
                    if hi is None or rid > hi:
                        hi = rid
            except sqlite3.DatabaseError as e:
                err = str(e)
                if "decode" in err and self.src.text_factory is not sf.text_or_invalid:
                    # text that is not valid UTF-8: read it as the bytes it is, from here on
                    self.src.text_factory = sf.text_or_invalid
                    continue
            if err is None:
                if got < self.batch or hi >= INT64_MAX:
                    break
                last = hi
                resumed = None
                continue
            if got == 0 and resumed is not None:
                floor = resumed     # the resume key itself fails in a batch: never retry it
            last = hi
            start = max(x for x in (INT64_MIN - 1, last, floor) if x is not None)
            nxt = self._skip_forward(st, known, start)
            st.walk_bad_ranges.append({"after_rowid": last, "resume_rowid": nxt, "error": err})
            if nxt is None or nxt <= start or nxt <= INT64_MIN:
                break
            resumed = nxt
            last = nxt - 1
        # keys the page scan knows but the seeks did not return: passed over (a garbage key
        # reorders a tree) or lost with an error (Python's cursor steps one row ahead, so
        # the row before a failing step is never handed out). A point read never steps on.
        point = "SELECT rowid, * FROM %s NOT INDEXED WHERE rowid = ?" % _q(t.name)
        for k in known:
            if k in seen_walk:
                continue
            for _try in (1, 2):
                try:
                    for row in self.src.execute(point, (k,)).fetchall():
                        st.add(row[0], list(row[1:]), walk=True)
                except sqlite3.DatabaseError as e:
                    if "decode" in str(e) and self.src.text_factory is not sf.text_or_invalid:
                        self.src.text_factory = sf.text_or_invalid
                        continue
                break

    def _readable_from(self, t, rowid):
        try:
            # as far as a batch reads: a seek can succeed where the next step fails
            self.src.execute("SELECT rowid, * FROM %s NOT INDEXED WHERE rowid >= ? ORDER BY rowid "
                             "LIMIT ?" % _q(t.name), (rowid, self.batch)).fetchall()
            return True
        except sqlite3.DatabaseError:
            return False

    def _skip_forward(self, st, known, last):
        """First key after `last` from which SQLite reads again: exponential search then
        bisection over the keys the page scan found, else probes up the rowid space."""
        t = st.t
        cands = known[bisect.bisect_right(known, last):]
        lo, j, step, ok = -1, 0, 1, None
        while j < len(cands):
            if self._readable_from(t, cands[j]):
                ok = j
                break
            lo = j
            j += step
            step *= 2
        if ok is None and cands and lo != len(cands) - 1 and self._readable_from(t, cands[-1]):
            ok = len(cands) - 1
        if ok is not None:
            hi = ok
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self._readable_from(t, cands[mid]):
                    hi = mid
                else:
                    lo = mid
            return cands[hi]
        base = cands[-1] if cands else max(last, INT64_MIN)
        step = 1
        while base + step <= INT64_MAX:
            if self._readable_from(t, base + step):
                return base + step
            step *= 4
        return None

    def _walk_without_rowid(self, st):
        t = st.t
        try:
            for i, row in enumerate(self.src.execute("SELECT * FROM %s" % _q(t.name))):
                st.add(("wr", i), list(row), walk=True)
        except sqlite3.DatabaseError as e:
            st.walk_errors.append("WITHOUT ROWID table read stopped: %s" % e)

    # ------------------------------------------------------------ quarantine

    def _quarantine(self, table, rowid, values, reason, page=None, raw=None, count=True):
        if self.qfh is None:
            fd = os.open(self.quarantine_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            self.qfh = os.fdopen(fd, "w")
            self.report["quarantine_file"] = self.quarantine_path
        rec = {"table": table, "rowid": rowid if not isinstance(rowid, tuple) else None,
               "reason": reason, "page": page}
        if values is not None:
            cols = self.tables[table].columns if table in self.tables else None
            vals = [_jsonable(v) for v in values]
            rec["values"] = dict(zip(cols, vals)) if cols and len(cols) == len(vals) else vals
        if raw is not None:
            rec["raw_hex"] = bytes(raw).hex()
        self.qfh.write(json.dumps(rec, sort_keys=True) + "\n")
        if count:
            self.q_count += 1
            if table in self.states:
                st = self.states[table]
                st.quarantined += 1
                key = reason.split(":")[0]
                st.quarantine_reasons[key] = st.quarantine_reasons.get(key, 0) + 1

    # ------------------------------------------------------------ output

    def _write_output(self):
        self.tmp_out = self.output + ".salvage-tmp"
        for suffix in ("", "-wal", "-shm", "-journal"):
            if os.path.exists(self.tmp_out + suffix):
                os.unlink(self.tmp_out + suffix)
        fd = os.open(self.tmp_out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        out = sqlite3.connect(self.tmp_out, isolation_level=None)
        out.text_factory = sf.text_or_invalid
        self.out = out
        out.execute("PRAGMA foreign_keys=OFF")
        out.execute("PRAGMA journal_mode=DELETE")
        out.execute("PRAGMA synchronous=OFF")
        keep = self.keep
        # the source's header fields, set before the first table exists (page size, encoding
        # and auto_vacuum cannot change after); checked against the output at the end
        out.execute("PRAGMA page_size=%d" % keep["page_size"])
        out.execute("PRAGMA auto_vacuum=%d" % keep["auto_vacuum"])
        if keep["encoding"] != "UTF-8":
            out.execute("PRAGMA encoding='%s'" % keep["encoding"])
        out.execute("PRAGMA user_version=%d" % keep["user_version"])
        out.execute("PRAGMA application_id=%d" % keep["application_id"])
        rows = self.schema_rows
        tables = self.tables
        fts_names = [t.name for t in tables.values() if t.virtual]
        fts_re = re.compile(r"(?i)(?<![\w$])[\"`\[]?(%s)[\"`\]]?(?![\w$])" % "|".join(
            re.escape(n) for n in fts_names)) if fts_names else None

        def refs_fts(sql):
            return bool(fts_re and sql and fts_re.search(sql))

        out.execute("BEGIN")
        for t in tables.values():
            if t.target:
                out.execute(t.sql)
        views = [r for r in rows if r["type"] == "view" and r["sql"]]
        for v in views:
            if self.fts == "leave-to-hermes" and refs_fts(v["sql"]):
                continue
            try:
                out.execute(v["sql"])
            except sqlite3.Error as e:
                self.notes.append("view %s not created: %s" % (v["name"], e))
        indexes = [r for r in rows if r["type"] == "index" and r["sql"]]
        unique_idx = [r for r in indexes if re.match(r"\s*CREATE\s+UNIQUE", r["sql"], re.I)]
        other_idx = [r for r in indexes if r not in unique_idx]
        triggers = [r for r in rows if r["type"] == "trigger" and r["sql"]]
        fts_triggers = [r for r in triggers if refs_fts(r["sql"])]
        other_triggers = [r for r in triggers if r not in fts_triggers]
        self.fts_report = {}
        self.fts_created = []
        self.fts_jobs = []
        self.fts_config_expected = {}
        self.fts_checked = set()
        out.execute("COMMIT")
        if self.fts == "rebuild":
            by_table = self._fts_triggers()
            for name in fts_names:
                trigs = by_table[name]
                job, why = self.fts_spec.get(name), None
                if job is None and trigs and self.fts_build == "scratch":
                    job, why = self._fts_prepare(name, trigs)
                if job is not None:
                    # built by its triggers from the final rows, after they are all in
                    self.fts_jobs.append(job)
                    continue
                # fallback: FTS before the rows, so the source's own triggers index them
                # one by one as they go in
                self._create_fts(name, trigs)
                rep = self.fts_report[name]
                if why:
                    rep["build"] = "triggers"
                    rep["scratch_unavailable"] = why
                    if rep["created"]:
                        self.notes.append("FTS table %s: scratch build unavailable (%s); "
                                          "indexed by its triggers during the load" % (name, why))
        else:
            for name in fts_names:
                self.fts_report[name] = {"mode": "leave-to-hermes", "created": False}
        out.execute("BEGIN")
        for r in unique_idx:
            try:
                out.execute(r["sql"])
            except sqlite3.Error as e:
                self.notes.append("index %s not created: %s" % (r["name"], e))
        out.execute("COMMIT")
        # rows
        for name in self._load_order():
            self._load_table(self.states[name])
        self._apply_repairs()
        self._fk_fix()
        self._check_against_copies()
        out.execute("BEGIN")
        for r in other_idx:
            try:
                out.execute(r["sql"])
            except sqlite3.Error as e:
                self.notes.append("index %s not created: %s" % (r["name"], e))
        for r in other_triggers:
            try:
                out.execute(r["sql"])
            except sqlite3.Error as e:
                self.notes.append("trigger %s not created: %s" % (r["name"], e))
        out.execute("COMMIT")
        self._copy_sequence()
        if self.fts_jobs:
            t = time.monotonic()
            self._build_fts()
            self._tick("fts_build", t)

    def _check_against_copies(self):
        """Rows whose content disagrees with the source's own copies of it: an FTS table that
        keeps its own content (an inline `_content` shadow table) holds, per row, what its
        insert trigger computed from the row. A row that every copy holding it contradicts
        has changed since it was written (or all its copies have): flagged as suspect. A copy the row agrees with outvotes one it does not
        (then the index was damaged, and it is rebuilt anyway)."""
        if self.src is None:
            return
        votes = {}          # (table, rowid) -> [copies present, copies disagreeing]
        try:
            self.out.execute("ATTACH DATABASE ? AS fleetops_src",
                             (_uri(self.report["image"]["path"], mode="ro", immutable="1"),))
        except sqlite3.Error as e:
            self.notes.append("content not checked against its FTS copies: %s" % e)
            return
        try:
            for name, trigs in self._fts_triggers().items():
                content = name + "_content"
                if content not in self.tables:
                    continue
                for r in trigs:
                    parsed = _trigger_insert(r["sql"], name)
                    tn = r.get("tbl_name")
                    if (parsed is None or tn not in self.states
                            or not re.search(r"(?i)\bAFTER\s+INSERT\b", r["sql"])):
                        continue
                    cols, exprs = parsed
                    self._vote(votes, tn, name, content, cols, exprs)
                    break       # one vote per copy
        finally:
            self.out.execute("DETACH DATABASE fleetops_src")
        for (tn, rowid), (present, against) in sorted(votes.items()):
            if against and against == present:
                st = self.states[tn]
                st.suspect.setdefault(rowid, []).append(
                    "its content disagrees with %s of its FTS cop%s in the source"
                    % ("the one" if present == 1 else "all %d" % present,
                       "y" if present == 1 else "ies"))

    def _vote(self, votes, tn, name, content, cols, exprs):
        """One FTS copy's votes on the rows of table tn (see _check_against_copies)."""
        if cols[0].lower() != "rowid" or len(cols) != len(exprs):
            return
        m = re.search(r"(?is)\busing\s+fts5\s*\(", self.tables[name].sql or "")
        args = _split_args(self.tables[name].sql[m.end():]) if m else None
        if args is None:
            return
        # the declared columns, in order (c0, c1, ... of the content table); options have '='
        fts_cols = [a.split()[0].strip('"`[]') for a in args if a and "=" not in a]
        idx = []
        for c in cols[1:]:
            if c not in fts_cols:
                return
            idx.append("c%d" % fts_cols.index(c))
        sub = [re.sub(r"(?i)\bnew\.", "m.", e) for e in exprs]
        same = " AND ".join("f.%s IS (%s)" % (c, e) for c, e in zip(idx, sub[1:])) or "1"
        sql = ("SELECT m.rowid, (%s) FROM main.%s AS m NOT INDEXED JOIN fleetops_src.%s AS f "
               "ON f.id = (%s) WHERE m.rowid BETWEEN ? AND ?" % (same, _q(tn), _q(content), sub[0]))
        keys = [r[0] for r in self.out.execute("SELECT rowid FROM main.%s NOT INDEXED ORDER BY rowid"
                                               % _q(tn))]
        todo = [keys[i:i + 256] for i in range(0, len(keys), 256)]
        unread = 0
        while todo:
            part = todo.pop()
            try:
                rows = self.out.execute(sql, (part[0], part[-1])).fetchall()
            except sqlite3.Error:
                if len(part) == 1:
                    unread += 1         # this row's copy is on a damaged page
                else:
                    todo += [part[:len(part) // 2], part[len(part) // 2:]]
                continue
            for row in rows:
                v = votes.setdefault((tn, row[0]), [0, 0])
                v[0] += 1
                if not row[1]:
                    v[1] += 1
        if unread:
            self.notes.append("%s: %d rows not checked against %s (that copy unreadable)"
                              % (tn, unread, name))

    def _create_fts(self, name, trigs):
        out = self.out
        t = self.tables[name]
        rep = {"mode": "rebuild", "created": False, "triggers": [r["name"] for r in trigs],
               "build": "triggers"}
        self.fts_report[name] = rep
        if not trigs:
            rep["mode"] = "leave-to-hermes"
            rep["reason"] = "source has no sync trigger for it; never an FTS table without triggers"
            return
        try:
            out.execute("SAVEPOINT fts")
            out.execute(t.sql)
            for r in trigs:
                out.execute(r["sql"])
            if name + "_config" in _schema_names(out, "table"):
                cfg = self._keep_fts_config(out, name, _fts_config_rows(out, name + "_config"))
                self.fts_config_expected[name] = cfg
            out.execute("RELEASE fts")
            rep["created"] = True
            self.fts_created.append(name)
        except sqlite3.Error as e:
            out.execute("ROLLBACK TO fts")
            out.execute("RELEASE fts")
            rep["mode"] = "leave-to-hermes"
            rep["reason"] = "host SQLite cannot create it (%s); left for Hermes to rebuild" % e
            self.notes.append("FTS table %s: %s" % (name, rep["reason"]))

    # ------------------------------------------------------------ FTS: scratch build

    def _fts_triggers(self):
        """{FTS table: the triggers that name it}, from the schema rows."""
        rows = self.schema_rows
        fts_names = [t.name for t in self.tables.values() if t.virtual]
        if not fts_names:
            return {}
        fts_re = re.compile(r"(?i)(?<![\w$])[\"`\[]?(%s)[\"`\]]?(?![\w$])" % "|".join(
            re.escape(n) for n in fts_names))
        triggers = [r for r in rows if r["type"] == "trigger" and r["sql"]
                    and fts_re.search(r["sql"])]
        out = {}
        for name in fts_names:
            one = re.compile(r"(?i)(?<![\w$])[\"`\[]?%s[\"`\]]?(?![\w$])" % re.escape(name))
            out[name] = [r for r in triggers if one.search(r["sql"])]
        return out

    @staticmethod
    def _trigger_reads(trigs, table):
        """Whether any of these triggers names `table` in its body."""
        one = re.compile(r"(?i)(?<![\w$])[\"`\[]?%s[\"`\]]?(?![\w$])" % re.escape(table))
        return any(one.search(r["sql"]) for r in trigs)

    # ------------------------------------------------------------ FTS: speculative build
    #
    # The FTS builds are the longest part of a salvage and need the final rows, known only
    # after the page scan, the walk and the load. When the tables the FTS triggers are on
    # are intact, those final rows are exactly what SQLite reads from the image; so the
    # builds start right away from the image, on the spare cores, while the page scan runs.
    # A speculative build is used only when the output's rows are then proved identical
    # (every rowid, every value, type-exact) to the image's: then its input, statement and
    # settings are those of the normal build, and so are its bytes. Otherwise it is stopped
    # and the table is built from the output like any other.

    def _speculate_fts(self):
        if (self.fts != "rebuild" or self.fts_build != "scratch" or not self.fts_speculate
                or self.src is None):
            return
        workers = self.fts_workers or _cpus()
        if workers < 2:
            return          # no spare core: the page scan would only be slowed down
        size = self.report["image"]["size"]
        try:
            st = os.statvfs(os.path.dirname(self.output))
            if st.f_bavail * st.f_frsize < 4 * size:
                return
        except (OSError, AttributeError):
            return
        by_table = self._fts_triggers()
        jobs = []
        for name, trigs in by_table.items():
            if not trigs:
                continue
            # which to start first, on too few cores for all (the source's FTS sizes are
            # not known yet, and may be garbage): a trigram index takes a token per
            # character, several times the work of a word tokenizer
            weight = 5 if re.search(r"(?i)\btrigram\b", self.tables[name].sql or "") else 1
            job, _why = self._fts_prepare(name, trigs, est_bytes=size)   # an upper bound
            if job is not None:
                job.from_image = True
                job.priority = weight
                jobs.append(job)
        if not jobs:
            return
        self.fts_spec_state = "running"
        self.fts_spec_pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers - 1)
        for job in sorted(jobs, key=lambda j: -j.priority):
            job.future = self.fts_spec_pool.submit(self._run_spec_job, job)
            self.fts_spec[job.name] = job

    def _run_spec_job(self, job):
        try:
            self._run_fts_job(job)
        except (sqlite3.Error, OSError) as e:
            job.spec_error = str(e)
        return job

    def _stop_speculation(self, why):
        """Stop every speculative build (interrupting those running); their tables are built
        from the output instead."""
        if self.fts_spec_state != "running":
            return
        self.fts_spec_state = "stopped"
        self.report["fts_speculation"] = {"used": False, "why": why}
        for job in self.fts_spec.values():
            job.stop = True
            job.future.cancel()
        for job in self.fts_spec.values():
            # an interrupt between two statements is lost: repeat it until the build ends
            while not job.future.done():
                with job.lock:
                    if job.con is not None:
                        try:
                            job.con.interrupt()
                        except sqlite3.Error:
                            pass
                concurrent.futures.wait([job.future], timeout=0.05)
        self.fts_spec_pool.shutdown(wait=True)

    def _speculation_damage_check(self):
        """After the page scan and the walk: damage in a table the FTS triggers are on means
        its final rows will differ from the image's; stop speculating now (saves the CPU)."""
        if self.fts_spec_state != "running":
            return
        on = set()
        for job in self.fts_spec.values():
            on.update(job.on)
        for tn in sorted(on):
            st = self.states[tn]
            if (st.bad_pages or st.bad_cells or st.orphan_pages or st.double_refs
                    or st.walk_bad_ranges or st.walk_errors or st.undecodable):
                self._stop_speculation("damage found in %s" % tn)
                return

    def _rows_match_image(self, tn):
        """The output's rows of table tn are exactly the image's: the same rowids, each row
        with the same values of the same types (text compared byte for byte, numbers exactly),
        as a speculative build read them. Compared by SQLite on a connection of its own."""
        t = self.tables[tn]
        same = " AND ".join(
            "a.{c} IS b.{c} AND typeof(a.{c}) = typeof(b.{c}) "
            "AND CAST(a.{c} AS BLOB) IS CAST(b.{c} AS BLOB)".format(c=_q(c)) for c in t.columns)
        con = None
        try:
            con = sqlite3.connect(_uri(self.report["image"]["path"], mode="ro", immutable="1"),
                                  uri=True)
            con.execute("ATTACH DATABASE ? AS fleetops_out", (_uri(self.tmp_out, mode="ro"),))
            n_out, n_img, n_same = con.execute(
                "SELECT (SELECT count(*) FROM fleetops_out.{t} NOT INDEXED), "
                "(SELECT count(*) FROM main.{t} NOT INDEXED), "
                "(SELECT count(*) FROM fleetops_out.{t} AS a NOT INDEXED "
                "JOIN main.{t} AS b NOT INDEXED ON b.rowid = a.rowid WHERE {same})".format(
                    t=_q(tn), same=same or "1")).fetchone()
            return n_out == n_img == n_same
        except sqlite3.Error:
            return False
        finally:
            if con is not None:
                con.close()

    def _settle_speculation(self):
        """At the FTS phase, the rows final: keep the speculative builds if their input was
        exactly these rows (those not started yet run from the output: the same input), or
        stop them. Returns the jobs that still have to run."""
        spec = [j for j in self.fts_jobs if j.future is not None]
        if self.fts_spec_state == "running":
            on = set()
            for job in spec:
                on.update(job.on)
            t = time.monotonic()
            diff = [tn for tn in sorted(on) if not self._rows_match_image(tn)]
            self._tick("fts_speculation_check", t)
            if diff:
                self._stop_speculation("final rows of %s differ from the image's" % ", ".join(diff))
            else:
                self.fts_spec_state = "used"
                for job in spec:
                    if job.future.cancel():
                        job.future = None
                        job.from_image = False
                self.fts_spec_pool.shutdown(wait=False)
                self.report["fts_speculation"] = {"used": True, "tables": []}
        todo = []
        for job in list(self.fts_jobs):
            if job.future is None:
                todo.append(job)
            elif self.fts_spec_state != "used":
                new = self._fresh_job(job)      # spoiled or never started: start over
                if new is not None:
                    todo.append(new)
        return todo

    def _fresh_job(self, job):
        """A new scratch database for a job whose speculative one cannot be used; None (and
        the table reported as left for Hermes) when none can be made."""
        self.fts_jobs.remove(job)
        try:
            os.unlink(job.path)
        except OSError:
            pass
        new, why = self._fts_prepare(job.name, job.trigs)
        if new is None:
            job.future = None
            job.error = "no scratch database for the build: %s" % why
            self._install_fts(job)
            return None
        self.fts_jobs.append(new)
        return new

    def _tree_bytes(self, names):
        """Bytes the source's pages of these trees take (page scan ownership)."""
        if getattr(self, "_owner_pages", None) is None:
            counts = {}
            for info in self.classes["pages"].values():
                if info["owner"] is not None:
                    counts[info["owner"]] = counts.get(info["owner"], 0) + 1
            self._owner_pages = counts
        return sum(self._owner_pages.get(n, 0) for n in names) * self.reader.page_size

    def _fts_prepare(self, name, trigs, est_bytes=None):
        """Scratch database for FTS table `name`: the tables its triggers are on, the FTS
        table and its triggers, all from the source's DDL, still empty.

        Returns (job, None), or (None, why) when the scratch build cannot be used (the
        caller then falls back to the triggers-during-the-load path)."""
        ft = self.tables[name]
        on = []
        for r in trigs:
            tn = r.get("tbl_name")
            t = self.tables.get(tn)
            if t is None or tn not in self.states or t.without_rowid:
                return None, "trigger %s is on %r, not a salvaged rowid table" % (r["name"], tn)
            if tn not in on:
                on.append(tn)
        order = self._load_order()
        on.sort(key=order.index)
        # tables the triggers read (a WHEN clause on state_meta keys): in the scratch database
        # too, with their salvaged rows, loaded first so the triggers decide as in the output
        reads = [tn for tn in order if tn not in on and self._trigger_reads(trigs, tn)]
        for tn in reads:
            if self.tables[tn].without_rowid:
                return None, "the triggers read %r, a WITHOUT ROWID table" % tn
        on = reads + on
        if est_bytes is None:
            shadows_src = [t.name for t in self.tables.values() if t.shadow_of == name]
            est = self._tree_bytes(on + shadows_src)
        else:
            est = est_bytes
        try:
            st = os.statvfs(os.path.dirname(self.output))
            free = st.f_bavail * st.f_frsize
        except (OSError, AttributeError):
            free = None
        reserved = sum(j.est_bytes for j in self.fts_jobs)
        need = self.report["image"]["size"] + int(1.5 * (reserved + est))
        if free is not None and free < need:
            return None, ("%d MB free beside the output, about %d MB needed with scratch "
                          "databases" % (free >> 20, need >> 20))
        job = _FtsJob(name, trigs, on, est)
        if not self.tmpdir:
            self.tmpdir = tempfile.mkdtemp(prefix="fleetops-salvage-",
                                           dir=os.path.dirname(self.output))
        self._scratch_n += 1
        job.path = os.path.join(self.tmpdir, "fts-%d.db" % self._scratch_n)
        con = None
        try:
            con = sqlite3.connect(job.path, isolation_level=None)
            # big pages: fewer pages and system calls for the bulk build (measured ~6% less
            # CPU); the FTS rows are the same bytes on any page size
            con.execute("PRAGMA page_size=65536")
            con.execute("BEGIN")
            for tn in on:
                con.execute(self.tables[tn].sql)
            before = _schema_names(con)
            con.execute(ft.sql)
            job.shadows = sorted(n for n in _schema_names(con, "table") - before if n != name)
            for r in trigs:
                con.execute(r["sql"])
            cfg = name + "_config"
            if cfg in job.shadows:
                job.config = _fts_config_rows(con, cfg)
            con.execute("COMMIT")
            # FTS5 bulk settings: only in the scratch database; its _config table is not
            # copied, so the output keeps the rows its own CREATE VIRTUAL TABLE wrote
            if (self.fts_build_config and job.config is not None
                    and re.search(r"(?i)\busing\s+fts5\b", ft.sql)):
                try:
                    for k, v in self.fts_build_config:
                        con.execute("INSERT INTO %s(%s, rank) VALUES (?, ?)" % (_q(name), _q(name)),
                                    (k, v))
                    job.tweaked = dict(self.fts_build_config)
                except sqlite3.Error as e:
                    job.tweak_error = str(e)
            return job, None
        except (sqlite3.Error, OSError) as e:
            return None, "cannot prepare it: %s" % e
        finally:
            if con is not None:
                con.close()

    def _run_fts_job(self, job):
        """Fill the scratch FTS table: every salvaged row of the tables its triggers are on,
        in key order, through one INSERT .. SELECT that fires the source's triggers.

        Runs in a worker thread (own connection; sqlite3 releases the GIL while it steps).
        The rows are first copied into the scratch database in one short read of the output,
        so the output is free for the main thread while the index is built."""
        t0 = time.monotonic()
        c0 = _thread_cpu()
        con = sqlite3.connect(_uri(job.path), uri=True, isolation_level=None,
                              check_same_thread=False)
        job.con = con
        try:
            if job.stop:
                raise sqlite3.OperationalError("speculative build stopped")
            for pragma in ("journal_mode=OFF", "synchronous=OFF", "main.locking_mode=EXCLUSIVE"):
                con.execute("PRAGMA " + pragma).fetchall()
            if job.from_image:
                # speculative: the image's rows, in key order, through the same kind of
                # statement as below; kept only if they prove to be the final rows
                con.execute("ATTACH DATABASE ? AS fleetops_img",
                            (_uri(self.report["image"]["path"], mode="ro", immutable="1"),))
                con.execute("BEGIN")
                for tn in job.on:
                    t = self.tables[tn]
                    cols = ", ".join(_q(c) for c in t.columns)
                    if t.alias is None:
                        con.execute("INSERT INTO main.%s(rowid, %s) SELECT rowid, %s FROM "
                                    "fleetops_img.%s NOT INDEXED ORDER BY rowid"
                                    % (_q(tn), cols, cols, _q(tn)))
                    else:
                        con.execute("INSERT INTO main.%s(%s) SELECT %s FROM fleetops_img.%s "
                                    "NOT INDEXED ORDER BY rowid" % (_q(tn), cols, cols, _q(tn)))
                con.execute("COMMIT")
                if job.stop:
                    raise sqlite3.OperationalError("speculative build stopped")
                job.seconds = time.monotonic() - t0
                job.cpu_seconds = _thread_cpu() - c0 if c0 is not None else None
                return
            con.execute("ATTACH DATABASE ? AS fleetops_out", (_uri(self.tmp_out, mode="ro"),))
            con.execute("BEGIN")
            for i, tn in enumerate(job.on):
                cols = ", ".join(_q(c) for c in self.tables[tn].columns)
                con.execute("CREATE TABLE main.fleetops_rows_%d AS SELECT rowid AS fleetops_rowid, "
                            "%s FROM fleetops_out.%s ORDER BY rowid" % (i, cols, _q(tn)))
            con.execute("COMMIT")
            con.execute("DETACH DATABASE fleetops_out")
            con.execute("BEGIN")
            for i, tn in enumerate(job.on):
                t = self.tables[tn]
                cols = ", ".join(_q(c) for c in t.columns)
                if t.alias is None:
                    con.execute("INSERT INTO main.%s(rowid, %s) SELECT fleetops_rowid, %s FROM "
                                "main.fleetops_rows_%d ORDER BY fleetops_rowid"
                                % (_q(tn), cols, cols, i))
                else:
                    con.execute("INSERT INTO main.%s(%s) SELECT %s FROM main.fleetops_rows_%d "
                                "ORDER BY fleetops_rowid" % (_q(tn), cols, cols, i))
            con.execute("COMMIT")
        finally:
            with job.lock:
                job.con = None
                con.close()
        job.seconds = time.monotonic() - t0
        job.cpu_seconds = _thread_cpu() - c0 if c0 is not None else None

    def _build_fts(self):
        """Build every prepared FTS table in its scratch database, as many at once as there
        are cores (those built speculatively from the image are kept when their input proves
        to be the final rows); each is copied into the output with its triggers as soon as it
        is built, and checked there (fresh connection) while the others are still building."""
        todo = self._settle_speculation()
        running = [j for j in self.fts_jobs if j.future is not None]
        workers = self.fts_workers or _cpus()
        workers = max(1, min(workers, len(todo) + len(running)))

        def run(job):
            try:
                self._run_fts_job(job)
            except (sqlite3.Error, OSError) as e:
                job.error = "scratch build failed: %s" % e
            return job

        def done(job, others_running):
            self._install_fts(job)
            try:
                os.unlink(job.path)
            except OSError:
                pass
            if others_running and job.name in self.fts_created:
                con = sqlite3.connect(self.tmp_out, isolation_level=None, timeout=600)
                try:
                    self._fts_check(job.name, con)
                finally:
                    con.close()
                self.fts_checked.add(job.name)

        self.report["fts_build"] = {"mode": "scratch", "workers": workers}
        if workers == 1 and not running:
            for job in sorted(todo, key=lambda j: -j.est_bytes):
                done(run(job), False)
            return
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers)
        try:
            futs = {}
            for job in sorted(todo, key=lambda j: -j.est_bytes):    # longest first
                futs[pool.submit(run, job)] = job
            for job in running:
                futs[job.future] = job
            pending = set(futs)
            while pending:
                finished, pending = concurrent.futures.wait(
                    pending, return_when=concurrent.futures.FIRST_COMPLETED)
                for f in finished:
                    job = futs[f]
                    if job.spec_error is not None:
                        # the image could not be read through: build it from the output
                        self.notes.append("FTS table %s: speculative build from the image "
                                          "failed (%s); built from the output"
                                          % (job.name, job.spec_error))
                        new = self._fresh_job(job)
                        if new is not None:
                            nf = pool.submit(run, new)
                            futs[nf] = new
                            pending.add(nf)
                        continue
                    done(job, bool(pending))
        finally:
            pool.shutdown(wait=True)

    def _install_fts(self, job):
        """The FTS table from the source's DDL, its shadow tables' rows copied as they are
        from the scratch build, then its triggers: one transaction, never one without the
        other."""
        out = None
        name = job.name
        rep = {"mode": "rebuild", "created": False, "triggers": [r["name"] for r in job.trigs],
               "build": "scratch", "build_s": round(job.seconds or 0, 3),
               "rows_from": "image (speculative, proved identical)" if job.from_image else "output"}
        if job.cpu_seconds is not None:
            rep["build_cpu_s"] = round(job.cpu_seconds, 3)
        if job.tweaked:
            rep["build_config"] = job.tweaked
        if job.tweak_error:
            rep["build_config_error"] = job.tweak_error
        self.fts_report[name] = rep
        if job.error is None:
            try:
                # its own connection: the one that loads the rows never instantiates the
                # FTS table (its cached index structure would be that of the empty table)
                out = sqlite3.connect(self.tmp_out, isolation_level=None, timeout=600)
                out.execute("PRAGMA synchronous=OFF")      # as the load: synced at the end
                out.execute("ATTACH DATABASE ? AS fleetops_fts", (job.path,))
            except sqlite3.Error as e:
                job.error = "cannot attach the scratch build: %s" % e
                if out is not None:
                    out.close()
        if job.error is None:
            try:
                out.execute("BEGIN")
                before = _schema_names(out)
                out.execute(self.tables[name].sql)
                shadows = sorted(n for n in _schema_names(out, "table") - before if n != name)
                if shadows != job.shadows:
                    raise sqlite3.DatabaseError("shadow tables differ from the scratch build: "
                                                "%s != %s" % (shadows, job.shadows))
                for sname in shadows:
                    if job.tweaked and sname == name + "_config":
                        continue       # keep the rows CREATE VIRTUAL TABLE just wrote
                    out.execute("DELETE FROM main.%s" % _q(sname))
                    out.execute("INSERT INTO main.%s SELECT * FROM fleetops_fts.%s"
                                % (_q(sname), _q(sname)))
                for r in job.trigs:
                    out.execute(r["sql"])
                cfg = self._keep_fts_config(out, name, job.config)
                out.execute("COMMIT")
                rep["created"] = True
                self.fts_created.append(name)
                if job.from_image and "fts_speculation" in self.report:
                    self.report["fts_speculation"]["tables"].append(name)
                if cfg is not None:
                    self.fts_config_expected[name] = cfg
            except sqlite3.Error as e:
                out.execute("ROLLBACK")
                job.error = "scratch build not installed: %s" % e
            out.close()
        if job.error is not None:
            rep["mode"] = "leave-to-hermes"
            rep["reason"] = "%s; left for Hermes to rebuild" % job.error
            self.notes.append("FTS table %s: %s" % (name, rep["reason"]))

    def _load_order(self):
        names = list(self.states)
        return [n for n in REPAIR_ORDER if n in names] + [n for n in names if n not in REPAIR_ORDER]

    def _foreign_ranges(self, st):
        """Key ranges where SQLite's walk of this table read a page another tree owns (or a
        leaf whose keys do not fit): rows it returned there may be another table's."""
        w = self.classes["walks"].get(st.t.name) if hasattr(self, "classes") else None
        if w is None:
            return []
        out = [(d.get("key_lo"), d.get("key_hi")) for d in w.double_refs
               if d.get("first_owner") not in (None, st.t.name)]
        out += [(i.get("key_lo"), i.get("key_hi")) for i in w.bad_pages.values()
                if i.get("foreign_leaf")]
        return out

    def _plan(self, st):
        """Rows to insert, in key order: per key, every version in order of evidence (seen
        by SQLite's walk and on the table's own leaves first; a walk row read through another
        tree's page last; then more copies, then the lowest page); extra instances are
        duplicates. The load tries them in that order until one goes in."""
        plan = []
        st.duplicates = 0
        st.conflicts = 0
        st.page_scan_only = 0
        st.identified = 0
        foreign = self._foreign_ranges(st)

        def in_foreign(k):
            return not isinstance(k, tuple) and any(
                (lo is None or k > lo) and (hi is None or k <= hi) for lo, hi in foreign)

        for rowid in sorted(st.keys, key=lambda k: (isinstance(k, tuple), k if not isinstance(k, tuple) else 0, str(k))):
            doubtful = in_foreign(rowid)
            theirs = st.foreign_cells.get(rowid, ())
            for ck, v in list(st.keys[rowid].items()):
                if v.walk and not v.lineage and not v.cells and ck in theirs:
                    # SQLite read it from a page that belongs to another table: not a row
                    # of this one (the page's own table has it)
                    del st.keys[rowid][ck]
                    st.foreign_read += 1
                    self._quarantine(st.t.name, rowid, v.values,
                                     "read through a page of another table: SQLite's walk of "
                                     "%s returned it from page %s" % (st.t.name, theirs[ck]),
                                     count=False)
            if not st.keys[rowid]:
                continue
            versions = sorted(st.keys[rowid].values(),
                              key=lambda v: (doubtful and v.walk and not v.lineage, bool(v.suspect),
                                             not v.walk, not v.lineage, -v.instances,
                                             v.first_page or 0))
            for v in versions:
                st.identified += v.instances
                st.duplicates += v.instances - 1
                if not v.walk:
                    st.page_scan_only += 1
            plan.append((rowid, versions))
        return plan

    def _insert_sql(self, sql, p):
        """The INSERT for these parameters: text that is not valid UTF-8 is bound as its bytes
        and cast to TEXT, so it is stored exactly as it was, as TEXT."""
        if not any(isinstance(x, sf.InvalidText) for x in p):
            return sql
        head, _sep, _tail = sql.rpartition("VALUES (")
        return head + "VALUES (" + ", ".join(
            "CAST(? AS TEXT)" if isinstance(x, sf.InvalidText) else "?" for x in p) + ")"

    def _params(self, t, rowid, v):
        if t.alias is None and not t.without_rowid:
            return [rowid] + list(v.values)
        return list(v.values)

    def _load_table(self, st):
        t = st.t
        out = self.out
        plan = self._plan(st)
        cols = list(t.columns)
        if t.alias is None and not t.without_rowid:
            sql = "INSERT INTO %s(rowid, %s) VALUES (?%s)" % (
                _q(t.name), ", ".join(_q(c) for c in cols), ", ?" * len(cols))
        else:
            sql = "INSERT INTO %s(%s) VALUES (%s)" % (
                _q(t.name), ", ".join(_q(c) for c in cols), ", ".join("?" * len(cols)))
        st.deferred = []
        for b in range(0, len(plan), self.batch):
            part = plan[b:b + self.batch]
            single = [(rowid, vs[0]) for rowid, vs in part if len(vs) == 1
                      and not vs[0].suspect
                      and not any(isinstance(x, sf.InvalidText) for x in vs[0].values)]
            out.execute("BEGIN")
            try:
                out.execute("SAVEPOINT batch")
                out.executemany(sql, [self._params(t, rowid, v) for rowid, v in single])
                out.execute("RELEASE batch")
            except sqlite3.DatabaseError:
                out.execute("ROLLBACK TO batch")
                out.execute("RELEASE batch")
                for rowid, v in single:
                    self._insert_one(st, sql, rowid, v, self._params(t, rowid, v))
            for rowid, vs in part:
                if len(vs) > 1:
                    self._insert_versions(st, sql, rowid, vs)
                elif vs[0].suspect or any(isinstance(x, sf.InvalidText) for x in vs[0].values):
                    self._insert_one(st, sql, rowid, vs[0], self._params(t, rowid, vs[0]))
            out.execute("COMMIT")

    def _insert_versions(self, st, sql, rowid, versions):
        """Two or more versions of one key: try each in order of evidence until one goes in
        (constraints and, for a NOT NULL reference, its parent row); quarantine the others.
        A version that fails only a repairable NOT NULL is kept for the repair pass when no
        other version goes in."""
        t = st.t
        failed = []
        chosen = None
        repairable = None
        for v in versions:
            why = self._missing_parent(t, v.values)
            if why is None:
                n_def = len(st.deferred)
                if self._insert_one(st, sql, rowid, v, self._params(t, rowid, v), quiet=True):
                    chosen = v
                    break
                if len(st.deferred) > n_def:
                    repairable = repairable or st.deferred.pop()
                    why = "NOT NULL constraint failed: %s.%s" % (t.name, repairable[4])
                else:
                    why = self._last_insert_error
            failed.append((v, why))
        if chosen is None and repairable is not None:
            st.deferred.append(repairable)
            chosen = repairable[1]
        kept = ("the version that %s" % ("went in" if chosen is not None and repairable is None
                                         or chosen is not repairable[1] else "is repaired")
                if chosen is not None else None)
        for v in versions:
            if v is chosen:
                continue
            st.conflicts += 1
            why = dict((id(x), w) for x, w in failed).get(id(v))
            self._quarantine(t.name, rowid, v.values,
                             "conflicting version: same key %s, different content; %s%s" % (
                                 rowid, "kept %s" % kept if kept else "no version went in",
                                 "; this one: %s" % why if why else ""),
                             page=v.first_page)

    def _missing_parent(self, t, values):
        """Why a row's NOT NULL reference has no parent in the output yet, or None."""
        for ci, ptable, pcol in self._notnull_fks(t):
            val = values[ci]
            if val is None or ptable not in self.states:
                continue
            try:
                if _one(self.out, "SELECT 1 FROM %s WHERE %s = ? LIMIT 1"
                        % (_q(ptable), _q(pcol)), (val,)) is None:
                    return "FOREIGN KEY: no %s row with %s = %r" % (ptable, pcol, val)
            except sqlite3.Error:
                return None
        return None

    def _notnull_fks(self, t):
        cache = self.__dict__.setdefault("_fk_cache", {})
        if t.name not in cache:
            out = []
            try:
                for f in self.out.execute("PRAGMA foreign_key_list(%s)" % _q(t.name)).fetchall():
                    col, ptable, pcol = f[3], f[2], f[4]
                    if col in t.columns and t.notnull[t.columns.index(col)]:
                        if pcol is None and ptable in self.tables:
                            pt = self.tables[ptable]
                            pcol = pt.columns[pt.alias] if pt.alias is not None else "rowid"
                        out.append((t.columns.index(col), ptable, pcol or "rowid"))
            except sqlite3.Error:
                pass
            cache[t.name] = out
        return cache[t.name]

    def _insert_one(self, st, sql, rowid, v, p, quiet=False):
        t = st.t
        try:
            self.out.execute("SAVEPOINT one")
            self.out.execute(self._insert_sql(sql, p), p)
            self.out.execute("RELEASE one")
            if any(isinstance(x, sf.InvalidText) for x in p):
                st.invalid_text.append(rowid)
            if v.suspect:
                st.suspect[rowid] = list(v.suspect)
            return True
        except sqlite3.DatabaseError as e:
            self.out.execute("ROLLBACK TO one")
            self.out.execute("RELEASE one")
            msg = str(e)
            m = re.match(r"NOT NULL constraint failed: [^.]+\.(\S+)", msg)
            if m and (t.name, m.group(1)) in REPAIR_RULES:
                st.deferred.append((rowid, v, p, sql, m.group(1)))
                return False
            if msg.startswith("UNIQUE constraint failed"):
                reason = "%s: kept the first row (lowest key) with this value" % msg
            else:
                reason = msg
            self._last_insert_error = reason
            if not quiet:
                self._quarantine(t.name, rowid, v.values, reason, page=v.first_page)
            return False

    def _apply_repairs(self):
        """Documented NOT NULL repairs, run once every table is loaded (they read neighbours)."""
        for name in self._load_order():
            st = self.states[name]
            for rowid, v, p, sql, col in getattr(st, "deferred", []):
                t = st.t
                rule = REPAIR_RULES[(t.name, col)]
                vals = list(v.values)
                try:
                    new, why = rule(self.out, (rowid, vals, t.columns))
                except sqlite3.Error as e:
                    new, why = None, None
                    self.notes.append("repair rule %s.%s failed: %s" % (t.name, col, e))
                if new is None:
                    self._quarantine(t.name, rowid, vals, "NOT NULL constraint failed: %s.%s: "
                                     "no value to repair from" % (t.name, col), page=v.first_page)
                    continue
                ci = t.columns.index(col)
                vals[ci] = new
                p = list(p)
                p[ci + (len(p) - len(vals))] = new
                self.out.execute("BEGIN")
                ok = self._insert_one(st, sql, rowid, Version(vals), p)
                self.out.execute("COMMIT")
                if ok:
                    st.repaired.append({"rowid": rowid, "column": col, "value": new, "rule": why})

    def _fk_fix(self):
        """Foreign keys: a nullable reference to a missing parent becomes NULL (repaired);
        a NOT NULL one (messages.session_id) sends the row to quarantine."""
        out = self.out
        for _ in range(10):
            try:
                bad = out.execute("PRAGMA foreign_key_check").fetchall()
            except sqlite3.Error as e:
                self.notes.append("foreign_key_check failed: %s" % e)
                return
            if not bad:
                return
            out.execute("BEGIN")
            for table, rowid, parent, fkid in bad:
                st = self.states.get(table)
                fks = [f for f in out.execute("PRAGMA foreign_key_list(%s)" % _q(table)).fetchall()
                       if f[0] == fkid]
                from_cols = [f[3] for f in fks]
                t = self.tables[table]
                row = _one(out, "SELECT * FROM %s WHERE rowid = ?" % _q(table), (rowid,))
                if row is None:
                    continue
                nullable = all(not t.notnull[t.columns.index(c)] for c in from_cols
                               if c in t.columns)
                if nullable and from_cols:
                    out.execute("UPDATE %s SET %s WHERE rowid = ?" % (
                        _q(table), ", ".join("%s = NULL" % _q(c) for c in from_cols)), (rowid,))
                    if st is not None:
                        st.repaired.append({"rowid": rowid, "column": ",".join(from_cols),
                                            "value": None, "was": [row[t.columns.index(c)]
                                                                   for c in from_cols],
                                            "rule": "reference to missing %s row set to NULL" % parent})
                else:
                    out.execute("DELETE FROM %s WHERE rowid = ?" % _q(table), (rowid,))
                    self._quarantine(table, rowid, list(row), "FOREIGN KEY: parent row in %s is "
                                     "missing (orphan)" % parent)
            out.execute("COMMIT")

    def _copy_sequence(self):
        if "sqlite_sequence" not in self.tables or self.src is None:
            return
        try:
            seqs = self.src.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
        except sqlite3.Error as e:
            self.notes.append("sqlite_sequence unreadable: %s" % e)
            return
        try:
            self.out.execute("BEGIN")
            for name, seq in seqs:
                if not isinstance(seq, int):
                    continue
                cur = _one(self.out, "SELECT seq FROM sqlite_sequence WHERE name = ?",
                                       (name,))
                if cur is None:
                    self.out.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)",
                                     (name, seq))
                elif cur[0] < seq:
                    self.out.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (seq, name))
            self.out.execute("COMMIT")
        except sqlite3.Error as e:
            self.out.execute("ROLLBACK")
            self.notes.append("sqlite_sequence not copied: %s" % e)

    # ------------------------------------------------------------ verify + report

    def _fts_check(self, name, out):
        rep = self.fts_report[name]
        out.text_factory = sf.text_or_invalid
        try:
            out.execute("INSERT INTO %s(%s) VALUES('integrity-check')" % (_q(name), _q(name)))
            rep["integrity_check"] = "ok"
        except sqlite3.Error as e:
            rep["integrity_check"] = str(e)
        try:
            rep["rows"] = _one(out, "SELECT count(*) FROM %s" % _q(name))[0]
            probe = None
            for row in out.execute("SELECT rowid, * FROM %s LIMIT 200" % _q(name)).fetchall():
                words = [w for text in row[1:] if isinstance(text, str)
                         for w in re.findall(r"[A-Za-z0-9]{4,}", text)]
                if words:
                    probe = (row[0], words[0])
                    break
            if probe is None:
                rep["match_probe"] = "no text to probe" if rep["rows"] == 0 else "no probe word"
                rep["match_ok"] = rep["rows"] == 0
            else:
                hits = [r[0] for r in out.execute(
                    "SELECT rowid FROM %s WHERE %s MATCH ?" % (_q(name), _q(name)),
                    ('"%s"' % probe[1],))]
                rep["match_probe"] = {"word": probe[1], "rowid": probe[0], "hits": len(hits)}
                rep["match_ok"] = probe[0] in hits
        except sqlite3.Error as e:
            rep["match_probe"] = str(e)
            rep["match_ok"] = False
        return rep["integrity_check"] == "ok" and rep["match_ok"]

    def _keep_fts_config(self, out, name, ddl_rows):
        """Give the new FTS table the source's settings (its _config rows: usermerge, rank,
        pgsz, ...), written as rows like the other shadow tables; `version` stays the one this
        SQLite's CREATE wrote, as the index is in its format. Returns the rows it now has (the
        DDL's when the source's cannot be read, noted)."""
        if ddl_rows is None:
            return None
        src_rows = None
        if self.src is not None:
            try:
                src_rows = _fts_config_rows(self.src, name + "_config")
            except sqlite3.Error as e:
                self.notes.append("FTS table %s: the source's settings are unreadable (%s); "
                                  "the rebuilt table has its DDL's" % (name, e))
        if src_rows is None:
            return ddl_rows
        return put_fts_config(out, name, src_rows, ddl_rows)

    def _fts_config_check(self, name):
        """The output's FTS config rows are exactly those its CREATE VIRTUAL TABLE wrote
        (a scratch build's bulk settings never reach it); a source whose rows differ is
        noted, as the rebuilt table starts from the DDL."""
        rep = self.fts_report[name]
        cfg = name + "_config"
        if cfg not in _schema_names(self.out, "table"):
            return True
        got = _fts_config_rows(self.out, cfg)
        rep["config"] = got
        ok = True
        if name in self.fts_config_expected:
            ok = got == self.fts_config_expected[name]
            rep["config_preserved"] = ok
        if self.src is not None:
            try:
                src_rows = _fts_config_rows(self.src, cfg)
            except sqlite3.Error:
                src_rows = None
            if src_rows is not None and src_rows != got:
                self.notes.append("FTS table %s: the source's config rows %r differ from the "
                                  "rebuilt table's %r (rebuilt from the DDL)"
                                  % (name, src_rows, got))
        return ok

    def _verify_and_finish(self):
        # a fresh connection: verification sees only what is on disk
        self.out.close()
        # the output was written without syncs: start writing it back now, while it is
        # verified, so the durable commit at the end (journal mode WAL) has little left to do
        flush = threading.Thread(target=_fdatasync_path, args=(self.tmp_out,))
        flush.daemon = True
        flush.start()
        out = self.out = sqlite3.connect(self.tmp_out, isolation_level=None)
        # the FTS checks (an FTS5 integrity-check takes the write lock, so one at a time, on
        # their own fresh connection) run beside the read-only checks below
        todo = [n for n in self.fts_created if n not in self.fts_checked]
        fts_results = {}

        def fts_checks():
            con = sqlite3.connect(self.tmp_out, isolation_level=None, timeout=600,
                                  check_same_thread=False)
            try:
                for n in todo:
                    fts_results[n] = self._fts_check(n, con)
            except sqlite3.Error as e:
                fts_results["error"] = str(e)
            finally:
                con.close()

        checker = threading.Thread(target=fts_checks)
        checker.start()
        ver = {}
        try:
            ic = [r[0] for r in out.execute("PRAGMA integrity_check")]
            ver["integrity_check"] = ic if ic != ["ok"] else "ok"
            fk = out.execute("PRAGMA foreign_key_check").fetchall()
            ver["foreign_key_check"] = [list(r) for r in fk]
            counts_ok = True
            tables_rep = {}
            for name, st in self.states.items():
                saved = _one(out, "SELECT count(*) FROM %s NOT INDEXED" % _q(name))[0]
                via = _one(out, "SELECT count(*) FROM %s" % _q(name))[0]
                if saved != via:
                    counts_ok = False
                tables_rep[name] = self._table_report(st, saved, via)
            ver["counts_match"] = counts_ok
            ver["schema_objects"] = self._schema_check(out)
        finally:
            checker.join()
        fts_ok = "error" not in fts_results
        if not fts_ok:
            self.notes.append("FTS checks failed: %s" % fts_results["error"])
        for name in self.fts_created:
            rep = self.fts_report[name]
            fts_ok = (rep.get("integrity_check") == "ok" and rep.get("match_ok") is True
                      and fts_ok)
            fts_ok = self._fts_config_check(name) and fts_ok
        # fts=rebuild promises every FTS table rebuilt: one left out (a tokenizer this SQLite
        # lacks, a failed build) fails the salvage; leaving them to Hermes is the operator's
        # choice (fts=leave-to-hermes), never a fallback reported as fine
        fts_missing = [] if self.fts != "rebuild" else [
            "FTS table %s not rebuilt (%s); salvage with fts=leave-to-hermes to leave the FTS "
            "tables to Hermes" % (n, rep.get("reason") or "not created")
            for n, rep in sorted(self.fts_report.items()) if not rep.get("created")]
        ver["fts_not_rebuilt"] = fts_missing
        ver["fts_ok"] = fts_ok = fts_ok and not fts_missing
        schema_ok = ver["schema_objects"]["ok"]
        ver["ok"] = (ver["integrity_check"] == "ok" and not fk and counts_ok and fts_ok
                     and schema_ok)
        r = self.report
        r["verification"] = ver
        r["tables"] = tables_rep
        r["fts"] = self.fts_report
        r["quarantined_total"] = self.q_count
        r["loss_rows"] = sum(x["loss_rows"] for x in tables_rep.values())
        r["identified_rows"] = sum(x["identified"] for x in tables_rep.values())
        r["saved_rows"] = sum(x["saved"] for x in tables_rep.values())
        partial = [n for n, x in tables_rep.items() if x["verdict"] != "complete"]
        lost_somewhere = self.unattributed and any(self._holes(st) for st in self.states.values())
        sw = self.classes["walks"].get("sqlite_schema")
        ddl_lost = (sw is not None and bool(sw.bad_pages or sw.bad_cells) and not self.schema_from
                    and not self.report.get("schema_fallback", {}).get("used"))
        if not lost_somewhere and self.unattributed:
            self.notes.append("%d unreadable pages belong to no tree, and every table's tree is "
                              "whole: they held no live rows" % len(self.unattributed))
        if not ver["ok"]:
            r["verdict"] = "failed"
        elif partial or lost_somewhere or ddl_lost:
            r["verdict"] = "partial"
        else:
            r["verdict"] = "complete"
        schema_problems = [] if schema_ok else ["schema objects of the source not in the output "
                                                "as they were: %s" % ver["schema_objects"]]
        r["verdict_reasons"] = (["verification failed"] if not ver["ok"] else []) + fts_missing + \
            schema_problems + [
            "table %s is partial" % n for n in partial] + (
            ["%d unreadable pages could not be attributed to a table" % len(self.unattributed)]
            if lost_somewhere else []) + (
            ["sqlite_schema lost pages and no schema gives their objects' DDL: tables whose "
             "DDL was there are not salvaged"] if ddl_lost else [])
        # the journal mode the source was in (never DELETE to WAL or back: Hermes picked it
        # for this host's SQLite and filesystem), a WAL output checkpointed into one file (own
        # connection: no open statements); the switch commits with synchronous=FULL
        out.close()
        flush.join()
        out = sqlite3.connect(self.tmp_out, isolation_level=None)
        if self.keep["journal_mode"] == "wal":
            mode = out.execute("PRAGMA journal_mode=WAL").fetchall()
            ck = out.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        else:
            out.execute("PRAGMA synchronous=FULL")
            mode = out.execute("PRAGMA journal_mode").fetchall()
            ck = None
        r["output_format"] = _output_format(out, mode)
        out.close()
        r["output_journal_mode"] = r["output_format"]["journal_mode"]
        kept = dict((k, (self.keep[k], v)) for k, v in r["output_format"].items()
                    if self.keep.get(k) != v)
        if kept:
            r["verdict"] = "failed"
            r["verdict_reasons"].append("output differs from the source in %s" % ", ".join(
                "%s (%r, source %r)" % (k, b, a) for k, (a, b) in sorted(kept.items())))
        if ck and ck[0][0]:
            self.notes.append("output checkpoint was blocked: %r" % (ck,))
        os.chmod(self.tmp_out, 0o600)
        for suffix in ("-wal", "-shm"):
            if os.path.exists(self.tmp_out + suffix):
                if os.path.getsize(self.tmp_out + suffix) and suffix == "-wal":
                    self.notes.append("output WAL not empty after checkpoint")
                else:
                    os.unlink(self.tmp_out + suffix)
        fsync_file(self.tmp_out)
        os.rename(self.tmp_out, self.output)
        fsync_dir(os.path.dirname(os.path.abspath(self.output)))
        r["output_sha256"] = sha256_file(self.output)
        r["output_size"] = os.path.getsize(self.output)

    def _schema_check(self, out):
        """Every schema object the source had (tables, views, indexes, triggers, FTS tables and
        their shadow tables) is in the output with the source's SQL (a shadow table by name: its
        DDL is this SQLite's); left out are only the FTS tables not rebuilt, with their shadow
        tables and triggers, reported on their own."""
        gone = set(n for n, rep in self.fts_report.items() if not rep.get("created"))
        skip = set(gone)
        for name, trigs in self._fts_triggers().items():
            if name in gone:
                skip.update(r["name"] for r in trigs)
        for t in self.tables.values():
            if t.shadow_of in gone:
                skip.add(t.name)

        def objects(rows):
            return dict(((r["type"], r["name"]), r["sql"]) for r in rows
                        if r["sql"] and not r["name"].lower().startswith("sqlite_")
                        and r["name"] not in skip)

        want = objects(self.schema_rows)
        got = objects(_load_schema_rows(out))
        shadow = set(t.name for t in self.tables.values() if t.shadow_of)
        # DDL a fallback schema supplied for objects lost with the schema page was not read
        # from the file: one that could not be created is noted (the notes say why), not
        # counted as an object of the source the output lost
        guessed = set((self.report.get("schema_fallback") or {}).get("objects") or [])
        not_created = sorted("%s %s" % k for k in set(want) - set(got) if k[1] in guessed)
        want = dict((k, v) for k, v in want.items() if not (k[1] in guessed and k not in got))
        missing = sorted("%s %s" % k for k in set(want) - set(got))
        changed = sorted("%s %s" % k for k in set(want) & set(got)
                         if k[1] not in shadow and want[k] != got[k])
        extra = sorted("%s %s" % k for k in set(got) - set(want))
        return {"ok": not (missing or changed or extra), "objects": len(want),
                "missing": missing, "sql_differs": changed, "extra": extra,
                "fallback_ddl_not_created": not_created}

    def _table_report(self, st, saved, via_index):
        identified = st.identified + st.undecodable
        loss = identified - saved - st.duplicates
        accounted = identified == saved + st.duplicates + st.quarantined
        unreadable = dict((str(k), v) for k, v in st.bad_pages.items())
        reasons = []
        if loss:
            reasons.append("%d identified rows not saved" % loss)
        if unreadable:
            reasons.append("%d unreadable pages in its tree" % len(unreadable))
        if st.bad_cells:
            reasons.append("%d undecodable cells" % len(st.bad_cells))
        if st.walk_errors:
            reasons.extend(st.walk_errors)
        if st.invalid_text:
            reasons.append("%d rows saved with text that is not valid UTF-8 (bytes kept as "
                           "stored: damaged content)" % len(st.invalid_text))
        if st.suspect:
            reasons.append("%d rows saved whose content is in doubt (see suspect_rows)"
                           % len(st.suspect))
        if st.held_back.get("free pages unknown"):
            reasons.append("%d rows on orphan pages held back: they may be deleted rows"
                           % st.held_back["free pages unknown"])
        if not accounted:
            reasons.append("counts do not add up: identified %d != saved %d + duplicates %d + "
                           "quarantined %d" % (identified, saved, st.duplicates, st.quarantined))
        return {
            "identified": identified,
            "distinct_keys": len(st.keys),
            "saved": saved,
            "count_via_index": via_index,
            "duplicates_dropped": st.duplicates,
            "conflicting_versions": st.conflicts,
            "repaired": len(st.repaired),
            "repairs": st.repaired,
            "quarantined": st.quarantined,
            "quarantine_reasons": st.quarantine_reasons,
            "page_scan_only": st.page_scan_only,
            "orphan_pages": sorted(st.orphan_pages),
            "unreadable_pages": unreadable,
            "undecodable_cells": st.bad_cells,
            "pages_referenced_twice": st.double_refs,
            "walk_bad_ranges": st.walk_bad_ranges,
            "freelist_records_not_restored": st.freelist_records,
            "held_back_rows": st.held_back,
            "foreign_rows_read": st.foreign_read,
            "invalid_utf8_rows": sorted(st.invalid_text)[:100],
            "invalid_utf8_count": len(st.invalid_text),
            "suspect_rows": dict((str(k), st.suspect[k]) for k in sorted(st.suspect)[:100]),
            "suspect_count": len(st.suspect),
            "loss_rows": loss,
            "accounted": accounted,
            "verdict": "complete" if not reasons else "partial",
            "verdict_reasons": reasons,
        }

    def _write_report(self):
        tmp = self.report_path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(self.report, fh, indent=2, sort_keys=True, default=_json_default)
            fh.flush()
            os.fsync(fh.fileno())
        os.rename(tmp, self.report_path)
        fsync_dir(os.path.dirname(os.path.abspath(self.report_path)))


def _json_default(o):
    if isinstance(o, (bytes, bytearray)):
        return _jsonable(bytes(o))
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


class _FtsJob(object):
    """One FTS table built in a scratch database (see Salvage._build_fts)."""

    def __init__(self, name, trigs, on, est_bytes):
        self.name = name
        self.trigs = trigs
        self.on = on                  # the tables its triggers are on, in load order
        self.est_bytes = est_bytes
        self.path = None
        self.shadows = []
        self.config = None            # its _config rows as CREATE VIRTUAL TABLE wrote them
        self.tweaked = None
        self.tweak_error = None
        self.error = None
        self.seconds = None
        self.cpu_seconds = None
        self.from_image = False       # speculative: its rows read from the image
        self.future = None            # its speculative build, while one is pending
        self.spec_error = None
        self.con = None               # the building connection (to interrupt it)
        self.lock = threading.Lock()  # held to interrupt or to close that connection
        self.stop = False
        self.priority = 0             # which speculative build starts first


def _schema_names(con, kind=None):
    if kind:
        return set(r[0] for r in con.execute(
            "SELECT name FROM main.sqlite_master WHERE type = ?", (kind,)))
    return set(r[0] for r in con.execute("SELECT name FROM main.sqlite_master"))


def _fts_config_rows(con, table):
    return [list(r) for r in con.execute("SELECT k, v FROM main.%s ORDER BY k" % _q(table))]


def put_fts_config(con, name, src_rows, ddl_rows, schema="main"):
    """Write the source's FTS settings (rows of its _config) into the new table's _config, with
    `version` as this SQLite's CREATE wrote it; returns the rows written."""
    want = dict((k, v) for k, v in src_rows if k != "version")
    want.update((k, v) for k, v in ddl_rows if k == "version")
    cfg = "%s.%s" % (schema, _q(name + "_config"))
    con.execute("DELETE FROM %s" % cfg)
    for k, v in sorted(want.items()):
        con.execute("INSERT INTO %s(k, v) VALUES (?, ?)" % cfg, (k, v))
    return [[k, want[k]] for k in sorted(want)]


def _fdatasync_path(path):
    """Ask the kernel to write a file back now (an early flush; never the durability proof)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)
    except (OSError, AttributeError):
        pass


def _cpus():
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _thread_cpu():
    try:
        return time.thread_time()
    except (AttributeError, OSError):
        return None


def _trigger_insert(sql, fts_name):
    """(columns, value expressions) of the `INSERT INTO fts_name(...) VALUES (...)` in a
    trigger's SQL, split at top-level commas; None if it has no such statement."""
    m = re.search(r"(?is)INSERT\s+INTO\s+[\"`\[]?%s[\"`\]]?\s*\(([^)]*)\)\s*VALUES\s*\("
                  % re.escape(fts_name), sql or "")
    if not m:
        return None
    cols = [c.strip().strip('"`[]') for c in m.group(1).split(",")]
    exprs = _split_args(sql[m.end():])
    return None if exprs is None else (cols, exprs)


def _split_args(text):
    """The comma-separated items up to the parenthesis that closes the one just before
    ``text`` (quotes and nested parentheses respected), or None if it never closes."""
    exprs, depth, cur, quote = [], 0, "", None
    for ch in text:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                exprs.append(cur.strip())
                return exprs
            depth -= 1
        elif ch == "," and depth == 0:
            exprs.append(cur.strip())
            cur = ""
            continue
        cur += ch
    return None


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
        if info["owner"] is not None or pgno in free or info["kind"] in sf.PAGE_TYPE_NAMES.values():
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


def _source_format(image, header, image_info, inferred=(), fallback=None):
    """What the output keeps of the source: journal mode (WAL when the header says so or a
    WAL was applied), page size, encoding, user_version, application_id, auto_vacuum. From
    the source's own header; where that was damaged (fields inferred from the pages), the
    fields other than the page size come from the fallback header (schema_from: a healthy
    store of the same host) when there is one, else they are the inferred ones, said so."""
    with open(image, "rb") as fh:
        raw = fh.read(100)
    try:
        own = sf.parse_header(raw)
        origin = "header"
    except sf.FormatError:
        own = header
        origin = "fallback header (the source's is unreadable)"
    fields = own
    known = True
    if inferred:
        origin = "header inferred from the pages (%s)" % ", ".join(inferred)
        known = "file_format_versions" not in inferred
        if fallback:
            try:
                fields = sf.parse_header(fallback)
                origin += "; the other fields from schema_from's header"
                known = True
            except sf.FormatError:
                pass
    applied = bool(image_info.get("wal_present") and image_info.get("wal_applied"))
    wal = (fields.write_version, fields.read_version) == (2, 2) or applied
    # nothing says which mode it was: DELETE, which never exposes the store to the WAL-reset
    # bug; Hermes switches it to WAL itself where its SQLite is safe
    return {"journal_mode": "wal" if wal else "delete", "page_size": own.page_size,
            "journal_mode_known": known or applied,
            "encoding": {2: "UTF-16le", 3: "UTF-16be"}.get(fields.text_encoding, "UTF-8"),
            "user_version": fields.user_version, "application_id": fields.application_id,
            "auto_vacuum": (2 if fields.incremental_vacuum else 1) if fields.vacuum_mode else 0,
            "from": origin}


def _output_format(con, mode):
    """The output's fields of _source_format, read back through SQLite."""
    return {"journal_mode": mode[0][0].lower() if mode else None,
            "page_size": _one(con, "PRAGMA page_size")[0],
            "encoding": _one(con, "PRAGMA encoding")[0],
            "user_version": _one(con, "PRAGMA user_version")[0],
            "application_id": _one(con, "PRAGMA application_id")[0],
            "auto_vacuum": _one(con, "PRAGMA auto_vacuum")[0]}


def _open_reader(image, fallback_header=None):
    try:
        return sf.SQLiteFile(image)
    except sf.FormatError:
        if not fallback_header:
            raise
    with open(image, "rb") as fh:
        data = bytearray(fh.read())
    hdr = bytearray(fallback_header[:100])
    hdr[32:40] = b"\x00" * 8          # the healthy file's freelist is not ours
    data[:100] = hdr
    rd = sf.SQLiteFile(data=bytes(data))
    rd.header_from = "schema_from"
    return rd


# ---------------------------------------------------------------- public API

def salvage(source, output, fts="rebuild", schema_from=None, quarantine_freelist=False,
            report_path=None, **internal):
    """Salvage `source` into a new database at `output`; returns the report dict.

    Raises SalvageInputError when the arguments cannot be used (nothing written).
    `internal`: fts_build, fts_workers, fts_build_config (see Salvage; tests, benchmarks).
    """
    return Salvage(source, output, fts=fts, schema_from=schema_from,
                   quarantine_freelist=quarantine_freelist, report_path=report_path,
                   **internal).run()


def main(args):
    """Payload entry point: {source, output, fts?, schema_from?, quarantine_freelist?, report?}."""
    if args.get("_check"):
        return {"changed": False, "failed": False, "skipped": True,
                "msg": "check mode: would salvage %s into %s" % (args.get("source"), args.get("output"))}
    try:
        rep = salvage(args["source"], args["output"], fts=args.get("fts", "rebuild"),
                      schema_from=args.get("schema_from"),
                      quarantine_freelist=bool(args.get("quarantine_freelist")),
                      report_path=args.get("report"))
    except (SalvageInputError, KeyError) as e:
        return {"changed": False, "failed": True, "skipped": False, "bad_input": True,
                "msg": "salvage: %s" % e}
    except Exception as e:  # noqa: BLE001 - a payload must answer, never die silently
        return {"changed": False, "failed": True, "skipped": False,
                "msg": "salvage failed: %s: %s" % (type(e).__name__, e)}
    rep = json.loads(json.dumps(rep, default=_json_default))
    return {"changed": True, "failed": rep["verdict"] == "failed", "skipped": False,
            "msg": "salvage %s: %d of %d identified rows saved, %d lost" % (
                rep["verdict"], rep.get("saved_rows", 0), rep.get("identified_rows", 0),
                rep.get("loss_rows", 0)),
            "report": rep}
