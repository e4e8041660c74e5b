"""`fleetops audit` and `fleetops inspect`: the audit through the normal engine path, then the fleet table.

Exit codes: 0 every database healthy; 5 (EXIT_NOT_HEALTHY) a database that was audited is not
healthy; otherwise the engine's (2 a host failed, its audit included; 3 unreachable only;
4 bad input; 130 interrupted). 5 is distinct so scripts can tell "the fleet has damaged
stores" from "fleetops could not do its job"; when both happen, 5 wins: a damaged store is
what needs acting on, and the table names the hosts that could not be audited.
"""
from __future__ import annotations

import functools
import json
import sys

from fleetops.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED
from fleetops.options import SECRETS, results_target

EXIT_NOT_HEALTHY = 5


def _console():
    from rich.console import Console
    return Console(highlight=False)


NOT_AUDITED = ("unreachable", "audit_failed")   # pseudo-verdicts of hosts, not of databases


def exit_code(rows: list, engine_code: int) -> int:
    """4 and 130 win (the audit did not really run); then 5 if any audited db is not healthy;
    then the engine's (3 when hosts were only unreachable, 2 when an audit failed)."""
    if engine_code in (EXIT_BAD_INPUT, EXIT_INTERRUPTED):
        return engine_code
    if any(r["verdict"] != "healthy" for r in rows if r["verdict"] not in NOT_AUDITED):
        return EXIT_NOT_HEALTHY
    return engine_code


def write_document(out, head: dict, hosts: dict, clean) -> None:
    """One JSON object: `head`'s keys, then "hosts", each host's result cleaned and written on
    its own, so a thousand hosts' results are never copied whole at once."""
    dump = functools.partial(json.dumps, ensure_ascii=False, default=str)
    out.write(dump(head)[:-1] + (", " if head else "") + '"hosts": {')
    for i, (host, res) in enumerate(hosts.items()):
        out.write((", " if i else "") + dump(str(host)) + ": " + dump(clean(res)))
    out.write("}}\n")
    out.flush()


def audit(args, modules: dict) -> int:
    """Run playbooks/audit.yml on the inventory, store the figures, print the fleet table (or --json)."""
    from fleetops import bundled, runner
    from fleetops.engine.executor import RunOptions
    from fleetops.hermes.audit import AuditCollector, print_fleet, rows_from, store_audit

    extra_vars = {"fleetops_deep": bool(args.deep),
                  "fleetops_write_probe": bool(args.write_probe)}
    if args.budget:
        extra_vars["fleetops_audit_budget_gb"] = args.budget
    loaded = runner.load(bundled.path("audit"), args.inventory, extra_vars, limit=args.limit, note_secrets=SECRETS.update,
                         modules=modules)
    results_dir, results_db = results_target(args.results)
    options = RunOptions(limit=args.limit, extra_vars=extra_vars, check=False, forks=args.forks,
                         accept_new_host_keys=bool(args.accept_new_host_keys),
                         results_dir=results_dir, results_db=results_db,
                         known_hosts=args.known_hosts)
    collector = AuditCollector()
    real_stdout = sys.stdout
    done = runner.execute(loaded, options, json_output=args.json, console=None if args.json else _console(),
                          sinks=(collector,), document=False)
    store = done.store
    try:
        rows = rows_from(collector.results)
        try:
            store_audit(store, done.run_id, collector.results)
        except Exception as exc:  # figures not stored must not hide the verdicts
            print(f"fleetops: audit figures not stored in {store.db_path}: {exc}", file=sys.stderr)
    finally:
        store.close()
    code = exit_code(rows, done.exit_code)
    if args.json:
        write_document(real_stdout, {"run_id": done.run_id, "exit_code": code, "engine_exit_code": done.exit_code,
                                     "healthy": code == 0, "databases": store.clean(rows)},
                       collector.results, store.clean)
    else:
        print_fleet(rows, _console())
    return code


def inspect(args) -> int:
    """The same checks on one local file, by importing the host payload directly."""
    from fleetops.hermes.audit import print_fleet, rows_from
    from fleetops.remote.hermes import audit as hermes_audit

    res = hermes_audit.main({"db_path": args.path, "deep": bool(args.deep), "services": False,
                             "budget_gb": args.budget})
    if res.get("failed"):
        print(f"fleetops inspect: {res.get('msg')}", file=sys.stderr)
        return 2
    rows = rows_from({"localhost": res})
    code = 0 if all(r["verdict"] == "healthy" for r in rows) else EXIT_NOT_HEALTHY
    if args.json:
        print(json.dumps(dict(res, exit_code=code), ensure_ascii=False, default=str))
    else:
        print_fleet(rows, _console(), title=f"state.db audit: {args.path}")
    return code
