"""The state a salvage run carries from stage to stage, split so that each part is written by one
stage (the modules named below) and only read by the later ones:

| part | written by | what |
|---|---|---|
| `args` (SalvageArgs, frozen) | nobody after salvage() made it | the arguments |
| `image` (Image) | inputs | the source's fingerprints, its image, reader and header, the format to keep |
| `schema` (Schema) | schema | the connection to the image, sqlite_schema rows, tables and their TableStates |
| `scan` (Scan) | scan, index_evidence (the page scan) | page classes, free pages, unattributed and held-back rows, the indexes' copies |
| `quarantine` (Quarantine) | walk | the quarantine file and its count |
| `dest` (Output) | write (verify reopens it: Output.reopen) | the temporary output and its connection |
| `fts` (Fts) | fts, ftsbuild, ftscheck, speculate (the FTS stage) | the FTS builds, their checks and the speculation from the image |

`report`, `notes` and `durations` are the report: every stage adds its own keys and lines (and
`tick()`s its time); `scratch_dir()` makes the run's private directory on first use. The rows a
table gathers (its `model.TableState`) are filled by the scan and the walk and read by write.
Every stage is a function taking the state (`s`); tests/unit/remote/sqlite/test_salvage_state.py
reads the stages' assignments and holds each part to its writers (`WRITERS`)."""
from __future__ import annotations

import os
import sqlite3
import time
import tempfile
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

from fleetops.remote.sqlite.salvage.rules import Rules

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
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1


class SalvageInputError(Exception):
    """The arguments or the source cannot be used at all (CLI exit 4)."""


class SalvageError(Exception):
    """The salvage itself failed part way (CLI exit 2); no output and no temporary file left."""


@dataclass(frozen=True)
class SalvageArgs:
    """The arguments (salvage()), paths made absolute; never written."""
    source: str                     # the damaged database; never written
    output: str                     # the new database; must not exist
    fts: str = "rebuild"            # "rebuild" the FTS tables, or "leave-to-hermes" (left to the application)
    schema_from: Optional[str] = None   # a healthy file of the same application: DDL (and header) fallback
    quarantine_freelist: bool = False   # also quarantine rows found on free pages (else held back, counted)
    report_path: Optional[str] = None   # where the JSON report is written, if anywhere
    batch: int = BATCH              # rows per INSERT transaction
    fts_build: str = "scratch"      # how FTS tables are built (FTS_BUILD_MODES; tests, benchmarks)
    fts_workers: Optional[int] = None   # FTS builds at once (None: one per core)
    fts_build_config: tuple = FTS5_BUILD_CONFIG  # FTS5 settings during a scratch build
    fts_speculate: bool = True      # may FTS builds start from the image before the rows are final
    rules: Rules = field(default_factory=Rules)  # what the application knows (repairs, lost schema)

    @property
    def quarantine_path(self) -> str:
        """<output>.quarantine.jsonl: rows not saved, with reasons."""
        return self.output + ".quarantine.jsonl"


@dataclass
class Image:
    """The source and its image (inputs)."""
    source_before: dict = field(default_factory=dict)  # source files' fingerprints at the start
    inferred_header: Any = None     # header inferred from the pages when the source's is bad
    reader: Any = None              # fileformat reader over the image
    header_inferred: List[str] = field(default_factory=list)  # header fields not taken from the source
    keep: dict = field(default_factory=dict)   # the source's format to keep (page size, journal mode...)


@dataclass
class Schema:
    """The schema (schema)."""
    src: Any = None                 # sqlite3 connection to the image (None: SQLite cannot open it)
    schema_rows: list = field(default_factory=list)  # sqlite_schema rows used (source, schema_from, pages)
    tables: dict = field(default_factory=dict)   # name -> model.Table
    states: dict = field(default_factory=dict)   # name -> model.TableState: rows found per table


@dataclass
class Scan:
    """The page scan (scan) and the source's indexes read as copies of its rows (index_evidence)."""
    classes: dict = field(default_factory=dict)  # page number -> page class from the reader
    free_set: Set[int] = field(default_factory=set)   # page numbers on the freelist
    free_evidence: dict = field(default_factory=dict)  # how the freelist was found, and if complete
    unattributed: dict = field(default_factory=dict)   # leaf records no table could claim
    held_back: dict = field(default_factory=lambda: {"rows": 0, "pages": 0, "by_reason": {}})
    interior_children: Optional[set] = None  # child pages of interior pages (cache)
    index_copies: dict = field(default_factory=dict)  # table -> [IndexCopy] read from the source


@dataclass
class Quarantine:
    """The table walk's quarantine (walk)."""
    qfh: Any = None                 # the open quarantine file, once a row is quarantined
    q_count: int = 0                # rows quarantined


@dataclass
class Output:
    """The output being written (write)."""
    tmp_out: Optional[str] = None   # <output>.salvage-tmp until verified and renamed
    out: Any = None                 # sqlite3 connection to tmp_out
    last_insert_error: Optional[str] = None  # why the last insert_one failed
    fk_cache: dict = field(default_factory=dict)   # table -> its NOT NULL foreign keys

    def reopen(self) -> Any:
        """A fresh connection to the written file, the old one closed (verify: it sees only what
        is on disk)."""
        if self.tmp_out is None:
            raise SalvageError("no output written yet to reopen")
        self.out = sqlite3.connect(self.tmp_out, isolation_level=None)
        return self.out


@dataclass
class Fts:
    """The FTS build and its speculation (fts, ftsbuild, ftscheck, speculate)."""
    report: dict = field(default_factory=dict)   # FTS table -> how it was built and checked
    created: list = field(default_factory=list)  # FTS tables created in the output
    jobs: list = field(default_factory=list)     # fts.FtsJob of the scratch builds
    config_expected: dict = field(default_factory=dict)  # FTS table -> its _config rows to keep
    checked: set = field(default_factory=set)    # FTS tables already checked in the output
    spec: dict = field(default_factory=dict)     # FTS table -> a build started from the image
    spec_state: Optional[str] = None  # None, "running", "stopped" or "used"
    spec_pool: Any = None           # the thread pool of those builds
    scratch_n: int = 0              # scratch databases made (for their names)
    owner_pages: Optional[dict] = None  # b-tree name -> its page count (cache)


# which stage modules may write each part (the module docstring's table)
WRITERS: Dict[str, Tuple[str, ...]] = {
    "args": (), "image": ("inputs",), "schema": ("schema",), "scan": ("scan", "index_evidence"),
    "quarantine": ("walk",), "dest": ("write",), "fts": ("fts", "ftsbuild", "ftscheck", "speculate"),
}
# the report: every stage adds to it
REPORT = ("report", "notes", "durations")


class SalvageState:
    """One salvage run: its arguments, each stage's part, and the report."""

    def __init__(self, source: str, output: str, fts: str = "rebuild", schema_from: Optional[str] = None,
                 quarantine_freelist: bool = False, report_path: Optional[str] = None, batch: int = BATCH,
                 fts_build: str = "scratch", fts_workers: Optional[int] = None,
                 fts_build_config: Optional[tuple] = FTS5_BUILD_CONFIG, fts_speculate: bool = True,
                 rules: Optional[Rules] = None) -> None:
        if fts not in ("rebuild", "leave-to-hermes"):
            raise SalvageInputError("fts must be 'rebuild' or 'leave-to-hermes', not %r" % (fts,))
        if fts_build not in FTS_BUILD_MODES:
            raise SalvageInputError("fts_build must be one of %s, not %r" % (FTS_BUILD_MODES, fts_build))
        self.args = SalvageArgs(
            os.path.abspath(source), os.path.abspath(output), fts=fts,
            schema_from=os.path.abspath(schema_from) if schema_from else None,
            quarantine_freelist=quarantine_freelist, report_path=report_path, batch=batch,
            fts_build=fts_build, fts_workers=fts_workers, fts_build_config=tuple(fts_build_config or ()),
            fts_speculate=fts_speculate, rules=rules if rules is not None else Rules())
        self.image = Image()
        self.schema = Schema()
        self.scan = Scan()
        self.quarantine = Quarantine()
        self.dest = Output()
        self.fts = Fts()
        self.report: dict = {}      # the report, filled by every stage
        self.notes: List[str] = []  # report lines: what was done and why
        self.durations: Dict[str, float] = {}   # seconds per stage (tick())
        self.tmpdir: Optional[str] = None  # private scratch directory (image copy, FTS builds)

    def scratch_dir(self) -> str:
        """The run's private scratch directory beside the output, made on first use."""
        if not self.tmpdir:
            self.tmpdir = tempfile.mkdtemp(prefix="fleetops-salvage-", dir=os.path.dirname(self.args.output))
        return self.tmpdir

    def tick(self, name: str, t0: float) -> None:
        """Record how long stage `name` took since monotonic time t0."""
        self.durations[name] = round(time.monotonic() - t0, 3)
