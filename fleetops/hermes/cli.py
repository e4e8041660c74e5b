"""`fleetops audit` and `fleetops inspect`: the audit through the normal engine path, then the fleet table.

Exit codes: 0 every database healthy; 5 (EXIT_NOT_HEALTHY) any database not healthy, or a
host whose audit did not run; otherwise the engine's (2 a host failed, 3 unreachable only,
4 bad input, 130 interrupted). 5 is distinct so scripts can tell "the fleet has damaged
stores" from "fleetops could not do its job".
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading

from fleetops.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, BadInput

EXIT_NOT_HEALTHY = 5
PLAYBOOK = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "playbooks", "audit.yml")


def _console():
    from rich.console import Console
    return Console(highlight=False)


def exit_code(rows: list, engine_code: int) -> int:
    """4 and 130 win (the audit did not really run); then 5 if any db is not healthy; then the engine's."""
    from fleetops.hermes.audit import all_healthy
    if engine_code in (EXIT_BAD_INPUT, EXIT_INTERRUPTED):
        return engine_code
    if not all_healthy(rows):
        return EXIT_NOT_HEALTHY
    return engine_code


def audit(args) -> int:
    """Run playbooks/audit.yml on the inventory, store the figures, print the fleet table (or --json)."""
    from fleetops import cli as fcli
    from fleetops.engine.events import Fanout
    from fleetops.engine.executor import RunOptions, run_playbook
    from fleetops.engine.inventory import load_inventory
    from fleetops.engine.playbook import load_playbook
    from fleetops.engine.results import DEFAULT_RESULTS_DIR, ResultsStore, new_run_id
    from fleetops.engine.validate import validate
    from fleetops.hermes.audit import AuditCollector, print_fleet, rows_from, store_audit
    from fleetops.modules.registry import get_modules

    if not os.path.isfile(args.inventory):
        raise BadInput("inventory not found", where=args.inventory)
    if not os.path.isfile(PLAYBOOK):
        raise BadInput("audit playbook missing from this install", where=PLAYBOOK)
    extra_vars = {"fleetops_deep": bool(args.deep)}
    inventory = load_inventory(args.inventory)
    modules = get_modules()
    playbook = load_playbook(PLAYBOOK, modules)
    validate(playbook, inventory, extra_vars, modules)
    secret_values = fcli._secret_values(inventory, extra_vars, playbook)
    results_dir = getattr(args, "results", None) or DEFAULT_RESULTS_DIR
    store = ResultsStore(results_dir, secret_values=secret_values)
    options = RunOptions(limit=args.limit, extra_vars=extra_vars, check=False,
                         accept_new_host_keys=bool(getattr(args, "accept_new_host_keys", False)),
                         results_dir=results_dir, known_hosts=getattr(args, "known_hosts", None))
    run_id = new_run_id()
    collector = AuditCollector()
    if args.json:
        from fleetops.display import JsonCollector
        view = JsonCollector(secret_values=secret_values, results_dir=results_dir)
    else:
        from fleetops.display import LiveDisplay
        view = LiveDisplay(console=_console(), secret_values=secret_values, results_dir=results_dir)
    stop = threading.Event()

    def on_sigint(signum, frame):
        if stop.is_set():
            store.mark_interrupted(run_id, EXIT_INTERRUPTED)
            os._exit(EXIT_INTERRUPTED)
        stop.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    real_stdout = sys.stdout
    try:
        redirect = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
        with redirect:
            try:
                outcome = run_playbook(playbook, inventory, options, Fanout(store, view, collector), run_id,
                                       stop=stop)
            except BaseException:
                if hasattr(view, "stop_live"):
                    view.stop_live()
                store.mark_interrupted(run_id, EXIT_INTERRUPTED if stop.is_set() else 1)
                raise
        engine_code = int(outcome.exit_code)
        rows = rows_from(collector.results)
        try:
            store_audit(store, run_id, collector.results)
        except Exception as exc:  # figures not stored must not hide the verdicts
            print(f"fleetops: audit figures not stored in {store.db_path}: {exc}", file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, previous)
        store.close()
    code = exit_code(rows, engine_code)
    if args.json:
        doc = {"run_id": run_id, "exit_code": code, "engine_exit_code": engine_code,
               "healthy": code == 0, "databases": rows,
               "hosts": {h: store.clean(r) if hasattr(store, "clean") else r
                         for h, r in collector.results.items()}}
        real_stdout.write(json.dumps(doc, ensure_ascii=False, default=str) + "\n")
        real_stdout.flush()
    else:
        print_fleet(rows, _console())
    return code


def inspect(args) -> int:
    """The same checks on one local file, by importing the host payload directly."""
    from fleetops.hermes.audit import print_fleet, rows_from
    from fleetops.remote import hermes_audit

    res = hermes_audit.main({"db_path": args.path, "deep": bool(args.deep), "services": False})
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
