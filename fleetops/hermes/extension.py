"""What the Hermes package adds to fleetops, registered explicitly by `register(reg)`:
its modules, the `audit` / `inspect` / `salvage` commands, the audit section of
`fleetops report` and the Hermes pages of `fleetops report --html`."""
from __future__ import annotations

import argparse
import functools

from fleetops.hermes import audit, cli, salvage_cli, site
from fleetops.hermes.repair import (HermesHostlock, HermesQuarantine, HermesRepair, HermesRollback,
                                    HermesSnapshot, HermesStartWriters, HermesStopWriters, HermesSwap,
                                    HermesVerify)
from fleetops.options import DEFAULT_FORKS, RESULTS_HELP, examples, positive_int

BUDGET_HELP = ("on a store bigger than GB gigabytes (GiB), skip the audit's costliest FTS check unless --deep: the "
               "index walk, or on SQLite 3.44+ FTS5's own check (quick_check then runs table by table); the fleet "
               "table and JSON name every check skipped")

MODULES = (audit.HermesAudit, HermesSnapshot, HermesStopWriters, HermesStartWriters, HermesQuarantine,
           HermesRepair, HermesSwap, HermesVerify, HermesRollback, HermesHostlock)


def positive_gb(text: str) -> float:
    try:
        n = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of GB, got {text!r}") from None
    if not n > 0 or n != n or n == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of GB above 0, got {text}")
    return n


def _command(fn):
    def cmd(args) -> int:
        rc = fn(args)
        return 0 if rc is None else int(rc)
    return cmd


def add_commands(sub, registry) -> None:
    """The Hermes commands; `registry` is the composed one, whose modules `audit` runs with."""
    a = sub.add_parser("audit", help="read-only health audit of every Hermes state.db in the fleet", **examples(
        "fleetops audit -i hosts.yml           # exit 0 all healthy, 5 a store is not",
        "fleetops audit -i inventory/ -l gateways --budget 5 --forks 50",
        "fleetops audit -i hosts.yml --json | jq '.databases[] | select(.verdict != \"healthy\") | .host'"))
    a.add_argument("-i", "--inventory", required=True, metavar="INVENTORY")
    a.add_argument("-l", "--limit", metavar="PATTERN")
    a.add_argument("--deep", action="store_true", help="add integrity_check (index against table)")
    a.add_argument("--budget", type=positive_gb, metavar="GB", help=BUDGET_HELP)
    a.add_argument("--write-probe", action="store_true",
                   help="also prove a write lands: one row into state_meta, read back, deleted, committed; "
                        "refused on damaged files, retired WAL generations, DELETE journals under a writer "
                        "(docs: Internals, persistence evidence)")
    a.add_argument("-f", "--forks", type=positive_int, default=DEFAULT_FORKS, metavar="N",
                   help=f"hosts audited at once (default {DEFAULT_FORKS})")
    a.add_argument("--json", action="store_true")
    a.add_argument("--results", metavar="DIR|URL", help=RESULTS_HELP)
    a.add_argument("--accept-new-host-keys", action="store_true")
    a.add_argument("--known-hosts", metavar="FILE")
    a.set_defaults(func=_command(functools.partial(cli.audit, modules=registry.modules)))

    ins = sub.add_parser("inspect", help="the audit checks on one local state.db", **examples(
        "fleetops inspect ~/.hermes/state.db",
        "fleetops inspect copy-of-state.db --deep --json"))
    ins.add_argument("path", metavar="PATH")
    ins.add_argument("--deep", action="store_true")
    ins.add_argument("--budget", type=positive_gb, metavar="GB", help=BUDGET_HELP)
    ins.add_argument("--json", action="store_true")
    ins.set_defaults(func=_command(cli.inspect))

    s = sub.add_parser("salvage", help="recover every readable row of a damaged state.db into a new file", **examples(
        "fleetops salvage state.db recovered.db --report salvage.json   # exit 0 complete, 2 partial",
        "fleetops salvage state.db recovered.db --schema-from healthy-state.db",
        "fleetops salvage state.db recovered.db --fts leave-to-hermes"))
    s.add_argument("source", metavar="SOURCE")
    s.add_argument("output", metavar="OUTPUT")
    s.add_argument("--report", metavar="REPORT.json")
    s.add_argument("--fts", choices=("rebuild", "leave-to-hermes"), default="rebuild")
    s.add_argument("--schema-from", metavar="HEALTHY.db")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=_command(salvage_cli.salvage))


def add_report_options(parser) -> None:
    parser.add_argument("--audit", action="store_true", help="include the Hermes audit figures")


def render_report(run: dict, console, args) -> None:
    audit.render(run, console, audit=args.audit)


def document_report(run: dict, args) -> dict:
    doc = audit.document(run, audit=args.audit)
    return {} if doc is None else {"audit": doc}


def register(reg) -> None:
    """Add the Hermes part to a fleetops.extensions.Registry."""
    reg.description = "Run YAML playbooks over SSH across a fleet of Hermes hosts."
    reg.add_modules(MODULES)
    reg.commands.append(functools.partial(add_commands, registry=reg))
    reg.report_options.append(add_report_options)
    reg.add_report_section(render_report, document_report)
    reg.site_views.append(site)
    reg.exit_codes[5] = "a database not healthy (audit)"
    reg.next_steps.append("fleetops audit -i {inventory}")
