"""`fleetops salvage SOURCE OUTPUT`: run the salvage engine locally and show what it did.

Why a separate file: the engine (fleetops.remote.sqlite.salvage) is a stdlib-only host payload;
the terminal view (rich) and exit codes belong to the controller.
Exit codes: 0 complete, 2 partial or failed, 4 bad input (nothing written).
"""
from __future__ import annotations

import json
import sys

from fleetops.errors import EXIT_BAD_INPUT, EXIT_HOST_FAILED, EXIT_OK


def _get(args, name, default=None):
    if isinstance(args, dict):
        return args.get(name, default)
    return getattr(args, name, default)


def salvage(args) -> int:
    """Run salvage from parsed CLI arguments (argparse Namespace or dict); returns the exit code."""
    from fleetops.remote.hermes import salvage_rules    # heavy; only `fleetops salvage` needs them
    from fleetops.remote.sqlite import salvage as engine
    try:
        report = engine.salvage(
            _get(args, "source"), _get(args, "output"),
            fts=_get(args, "fts") or "rebuild",
            schema_from=_get(args, "schema_from"),
            quarantine_freelist=bool(_get(args, "quarantine_freelist", False)),
            report_path=_get(args, "report"), rules=salvage_rules.RULES)
    except (engine.SalvageInputError, engine.SalvageError) as e:
        bad_input = isinstance(e, engine.SalvageInputError)
        if _get(args, "json"):
            print(json.dumps({"verdict": "bad-input" if bad_input else "failed", "error": str(e)}))
        else:
            print("salvage: %s" % e, file=sys.stderr)
        return EXIT_BAD_INPUT if bad_input else EXIT_HOST_FAILED
    if _get(args, "json"):
        print(json.dumps(report, indent=2, sort_keys=True, default=engine.json_default))
    else:
        render(report)
    return EXIT_OK if report.get("verdict") == "complete" else EXIT_HOST_FAILED


def render(report, console=None) -> None:
    """Per-table summary with rich: what was found, saved, dropped, and why."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    t = Table(title="salvage %s -> %s" % (report.get("source"), report.get("output")))
    for col in ("table", "identified", "saved", "duplicates", "repaired", "quarantined",
                "page scan only", "unreadable pages", "loss", "verdict"):
        t.add_column(col, justify="left" if col in ("table", "verdict") else "right")
    for name, x in sorted(report.get("tables", {}).items()):
        style = "green" if x["verdict"] == "complete" else "yellow"
        t.add_row(name, str(x["identified"]), str(x["saved"]), str(x["duplicates_dropped"]),
                  str(x["repaired"]), str(x["quarantined"]), str(x["page_scan_only"]),
                  str(len(x["unreadable_pages"])), str(x["loss_rows"]),
                  "[%s]%s[/]" % (style, x["verdict"]))
    console.print(t)
    for name, f in sorted(report.get("fts", {}).items()):
        console.print("fts %s: %s%s" % (name, f.get("mode"),
                                        "" if not f.get("created") else ", integrity %s, match %s"
                                        % (f.get("integrity_check"), f.get("match_ok"))))
    out_fmt = report.get("output_format") or {}
    if out_fmt:
        objs = ((report.get("verification") or {}).get("schema_objects") or {}).get("objects")
        console.print("output as the source: journal mode %s, page size %s, user_version %s, "
                      "application_id %s, auto_vacuum %s, %s schema objects"
                      % (out_fmt.get("journal_mode"), out_fmt.get("page_size"), out_fmt.get("user_version"),
                         out_fmt.get("application_id"), out_fmt.get("auto_vacuum"), objs))
    img = report.get("image", {})
    src = report.get("source_unchanged", {})
    console.print("image: %s bytes sha256 %s; source unchanged: %s"
                  % (img.get("size"), img.get("sha256"), src.get("unchanged")))
    hb = report.get("held_back") or {}
    if hb.get("rows"):
        console.print("held back: %d rows on %d orphan pages that may be former pages (%s)" % (
            hb["rows"], hb["pages"], ", ".join("%s: %d" % kv for kv in sorted(hb["by_reason"].items()))))
    if report.get("header_inferred"):
        console.print("header fields inferred: %s" % ", ".join(report["header_inferred"]))
    fb = report.get("schema_fallback") or {}
    if fb.get("used"):
        console.print("DDL of %s from the schema Hermes %s creates" % (
            ", ".join(fb["objects"]), fb["hermes_version"]))
    suspect = sum(x.get("suspect_count", 0) + x.get("invalid_utf8_count", 0)
                  for x in report.get("tables", {}).values())
    if suspect:
        console.print("[yellow]suspect content:[/] %d rows kept and listed in the report" % suspect)
    if report.get("quarantine_file"):
        console.print("quarantine: %s (%d rows)" % (report["quarantine_file"],
                                                    report.get("quarantined_total", 0)))
    for n in report.get("notes", []):
        console.print("[yellow]note:[/] %s" % n)
    for n in report.get("verdict_reasons", []):
        console.print("[yellow]why:[/] %s" % n)
    v = report.get("verdict")
    colour = {"complete": "green", "partial": "yellow"}.get(v, "red")
    console.print("[bold %s]verdict: %s[/] (loss_rows %s, %.1fs)" % (
        colour, v, report.get("loss_rows"), report.get("durations_s", {}).get("total", 0.0)))
