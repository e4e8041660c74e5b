"""The one state a salvage run carries from stage to stage: its arguments, what each stage found,
and the report. Every stage is a function taking it (`s`); a field is written by the stage named
in its comment and read by the later ones."""
import os
import time
from dataclasses import dataclass, field
from typing import Any, Optional

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


@dataclass
class SalvageState:
    # ---- the arguments (salvage())
    source: str                     # the damaged database (made absolute); never written
    output: str                     # the new database (absolute); must not exist
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

    # ---- derived at the start
    quarantine_path: str = field(init=False)    # <output>.quarantine.jsonl: rows not saved, with reasons
    report: dict = field(init=False, default_factory=dict)      # the report, filled by every stage
    notes: list = field(init=False, default_factory=list)       # report lines: what was done and why
    durations: dict = field(init=False, default_factory=dict)   # seconds per stage (tick())
    # ---- inputs: the source and its image
    source_before: dict = field(init=False, default_factory=dict)  # source files' fingerprints at the start
    inferred_header: Any = field(init=False, default=None)  # header inferred from the pages when the source's is bad
    tmpdir: Optional[str] = field(init=False, default=None)  # private scratch directory (image copy, FTS builds)
    reader: Any = field(init=False, default=None)   # fileformat reader over the image
    header_inferred: list = field(init=False, default_factory=list)  # header fields not taken from the source
    keep: dict = field(init=False, default_factory=dict)   # the source's format to keep (page size, journal mode...)
    # ---- schema
    src: Any = field(init=False, default=None)      # sqlite3 connection to the image (None: SQLite cannot open it)
    schema_rows: list = field(init=False, default_factory=list)  # sqlite_schema rows used (source, schema_from, pages)
    tables: dict = field(init=False, default_factory=dict)   # name -> model.Table
    states: dict = field(init=False, default_factory=dict)   # name -> model.TableState: rows found per table
    # ---- scan (the page scan)
    classes: dict = field(init=False, default_factory=dict)  # page number -> page class from the reader
    free_set: Any = field(init=False, default_factory=set)   # page numbers on the freelist
    free_evidence: dict = field(init=False, default_factory=dict)  # how the freelist was found, and if complete
    unattributed: dict = field(init=False, default_factory=dict)   # leaf records no table could claim
    held_back: dict = field(init=False, default_factory=lambda: {"rows": 0, "pages": 0, "by_reason": {}})
    interior_children: Optional[set] = field(init=False, default=None)  # child pages of interior pages (cache)
    # ---- walk and quarantine
    qfh: Any = field(init=False, default=None)      # the open quarantine file, once a row is quarantined
    q_count: int = field(init=False, default=0)     # rows quarantined
    # ---- write
    tmp_out: Optional[str] = field(init=False, default=None)  # <output>.salvage-tmp until verified and renamed
    out: Any = field(init=False, default=None)      # sqlite3 connection to tmp_out
    last_insert_error: Optional[str] = field(init=False, default=None)  # why the last insert_one failed
    fk_cache: dict = field(init=False, default_factory=dict)   # table -> its NOT NULL foreign keys
    # ---- FTS build and its speculation
    fts_report: dict = field(init=False, default_factory=dict)   # FTS table -> how it was built and checked
    fts_created: list = field(init=False, default_factory=list)  # FTS tables created in the output
    fts_jobs: list = field(init=False, default_factory=list)     # fts.FtsJob of the scratch builds
    fts_config_expected: dict = field(init=False, default_factory=dict)  # FTS table -> its _config rows to keep
    fts_checked: set = field(init=False, default_factory=set)    # FTS tables already checked in the output
    fts_spec: dict = field(init=False, default_factory=dict)     # FTS table -> a build started from the image
    fts_spec_state: Optional[str] = field(init=False, default=None)  # None, "running", "stopped" or "used"
    fts_spec_pool: Any = field(init=False, default=None)  # the thread pool of those builds
    scratch_n: int = field(init=False, default=0)   # scratch databases made (for their names)
    owner_pages: Optional[dict] = field(init=False, default=None)  # b-tree name -> its page count (cache)
    # ---- indexes (indexes.read_copies)
    index_copies: dict = field(init=False, default_factory=dict)  # table -> [IndexCopy] read from the source

    def __post_init__(self):
        if self.fts not in ("rebuild", "leave-to-hermes"):
            raise SalvageInputError("fts must be 'rebuild' or 'leave-to-hermes', not %r" % (self.fts,))
        if self.fts_build not in FTS_BUILD_MODES:
            raise SalvageInputError("fts_build must be one of %s, not %r"
                                    % (FTS_BUILD_MODES, self.fts_build))
        self.fts_build_config = tuple(self.fts_build_config or ())
        self.source = os.path.abspath(self.source)
        self.output = os.path.abspath(self.output)
        self.schema_from = os.path.abspath(self.schema_from) if self.schema_from else None
        self.quarantine_path = self.output + ".quarantine.jsonl"

    def tick(self, name, t0):
        """Record how long stage `name` took since monotonic time t0."""
        self.durations[name] = round(time.monotonic() - t0, 3)
