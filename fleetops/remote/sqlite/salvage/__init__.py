"""Salvage every readable row of a damaged SQLite store into a new file.

Why two layers: SQLite's own table walk (seeks by rowid, NOT INDEXED) reads what its
b-trees still reach, fast and exactly as the application would; the pure-Python page scan
(fleetops.remote.sqlite.fileformat) finds leaf pages the walk cannot reach. Every row found
is either saved, dropped as an exact duplicate, or written to the quarantine file with a
reason, and the report's counts come from table scans and page scans, never an index.

A run is a sequence of stages, each a module of functions taking the one SalvageState
(state.py): inputs (the image), schema, scan (the page scan, and the source's indexes read
as copies of its rows: index_evidence), walk (the table walk and the quarantine), write
(the output's rows), fts, speculate, ftsbuild and ftscheck (the FTS tables), verify (checks,
rename, report). What the application that made the store knows (values for lost NOT NULL
columns, its shipped schema) comes in as Rules (rules.py).

Stdlib only, Python 3.8+ (host code); `main(args)` is a payload entry point. The source is
never written: it is read through an immutable read-only URI, or through a private copy when
a WAL has to be applied first.
"""
import json
import shutil
import time

from fleetops.remote.sqlite.salvage import (
    inputs,
    scan,
    schema,
    speculate,
    verify,
    walk,
    write,
)
from fleetops.remote.sqlite.salvage.ftscheck import put_fts_config
from fleetops.remote.sqlite.salvage.rules import Rules
from fleetops.remote.sqlite.salvage.sqlutil import file_fingerprints
from fleetops.remote.sqlite.salvage.state import (
    FTS5_BUILD_CONFIG,
    SalvageError,
    SalvageInputError,
    SalvageState,
)
from fleetops.remote.sqlite.salvage.verify import json_default

__all__ = ["FTS5_BUILD_CONFIG", "Rules", "SalvageError", "SalvageInputError", "SalvageState", "main",
           "put_fts_config", "salvage"]


def salvage(source, output, fts="rebuild", schema_from=None, quarantine_freelist=False,
            report_path=None, rules=None, **internal):
    """Salvage `source` into a new database at `output`; returns the report dict.

    Raises SalvageInputError when the arguments cannot be used (nothing written).
    `rules`: what the store's application knows (Rules; default: nothing).
    `internal`: fts_build, fts_workers, fts_build_config, fts_speculate (see SalvageState;
    tests, benchmarks).
    """
    s = SalvageState(source, output, fts=fts, schema_from=schema_from,
                     quarantine_freelist=quarantine_freelist, report_path=report_path,
                     rules=rules or Rules(), **internal)
    return run(s)


def run(s):
    """The stages in order; whatever happens, the source's fingerprints before and after, the
    durations and the notes end up in the report (written to report_path if given)."""
    t0 = time.monotonic()
    inputs.check_inputs(s)
    before = inputs.fingerprint_source(s)
    try:
        try:
            _stages(s)
        except SalvageInputError:
            raise
        except Exception as e:
            inputs.discard_output(s)
            s.report["verdict"] = "failed"
            s.report["error"] = "%s: %s" % (type(e).__name__, e)
            raise SalvageError("salvage failed: %s: %s (no output written)"
                               % (type(e).__name__, e)) from e
    finally:
        if s.fts.spec_state == "running":
            speculate.stop_speculation(s, "salvage ended before the FTS build")
        if s.fts.spec_pool is not None:
            s.fts.spec_pool.shutdown(wait=True)
        if s.quarantine.qfh:
            s.quarantine.qfh.close()
        if s.tmpdir:
            shutil.rmtree(s.tmpdir, ignore_errors=True)
        after = file_fingerprints(s.args.source)
        unchanged = all(before[k]["sha256"] == after.get(k, {}).get("sha256")
                        for k in before) and set(before) == set(after)
        s.report["source_unchanged"] = {
            "unchanged": unchanged,
            "before": dict((k, v["sha256"]) for k, v in before.items()),
            "after": dict((k, v["sha256"]) for k, v in after.items())}
        if not unchanged:
            s.report["verdict"] = "failed"
            s.notes.append("source files changed during salvage")
        s.durations["total"] = round(time.monotonic() - t0, 3)
        s.report["durations_s"] = s.durations
        s.report["notes"] = s.notes
        if s.args.report_path:
            verify.write_report(s)
    return s.report


def _stages(s):
    """image, schema, page scan, table walk, write (with the FTS build), verify."""
    r = s.report
    r.update({"source": s.args.source, "output": s.args.output, "fts_mode": s.args.fts,
              "schema_from": s.args.schema_from, "verdict": "failed",
              "quarantine_file": None, "quarantined_total": 0})
    t = time.monotonic()
    image, image_info = inputs.make_image(s)
    r["image"] = image_info
    s.tick("image", t)

    t = time.monotonic()
    inputs.read_header(s, image)
    schema.load_schema(s, image)
    s.tick("schema", t)
    speculate.speculate_fts(s)

    t = time.monotonic()
    scan.page_scan(s)
    s.tick("page_scan", t)

    t = time.monotonic()
    for st in s.schema.states.values():
        walk.walk_table(s, st)
    s.tick("table_walk", t)
    speculate.speculation_damage_check(s)


    t = time.monotonic()
    write.write_output(s)
    s.tick("write", t)

    t = time.monotonic()
    verify.verify_and_finish(s)
    s.tick("verify", t)
    s.image.reader.close()
    if s.schema.src:
        s.schema.src.close()


def main(args, rules=None):
    """Payload entry point: {source, output, fts?, schema_from?, quarantine_freelist?, report?};
    `rules` from a caller that knows the store's application (see salvage())."""
    if args.get("_check"):
        return {"changed": False, "failed": False, "skipped": True,
                "msg": "check mode: would salvage %s into %s" % (args.get("source"), args.get("output"))}
    try:
        rep = salvage(args["source"], args["output"], fts=args.get("fts", "rebuild"),
                      schema_from=args.get("schema_from"),
                      quarantine_freelist=bool(args.get("quarantine_freelist")),
                      report_path=args.get("report"), rules=rules)
    except (SalvageInputError, KeyError) as e:
        return {"changed": False, "failed": True, "skipped": False, "bad_input": True,
                "msg": "salvage: %s" % e}
    except Exception as e:  # noqa: BLE001 - a payload must answer, never die silently
        return {"changed": False, "failed": True, "skipped": False,
                "msg": "salvage failed: %s: %s" % (type(e).__name__, e)}
    rep = json.loads(json.dumps(rep, default=json_default))
    return {"changed": True, "failed": rep["verdict"] == "failed", "skipped": False,
            "msg": "salvage %s: %d of %d identified rows saved, %d lost" % (
                rep["verdict"], rep.get("saved_rows", 0), rep.get("identified_rows", 0),
                rep.get("loss_rows", 0)),
            "report": rep}
