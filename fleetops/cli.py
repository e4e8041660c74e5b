"""The `fleetops` command: argument parsing and wiring, nothing else.

Every expected error ends as one line `fleetops: error: <where>: <what>` and a
documented exit code (0 ok, 2 host failed, 3 unreachable only, 4 bad input,
130 interrupted); tracebacks only with FLEETOPS_DEBUG=1.
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import re
import shlex
import sqlite3
import sys
import traceback

from fleetops import __version__
from fleetops.engine.results_backend import store_errors
from fleetops.errors import EXIT_BAD_INPUT, EXIT_HOST_FAILED, EXIT_INTERRUPTED, BadInput, FleetopsError
from fleetops.extensions import registry
from fleetops.options import DEFAULT_FORKS, RESULTS_HELP, SECRETS, examples, positive_int, results_target

EXIT_UNEXPECTED = 1
EXIT_CODES = {0: "all ok", 2: "a host failed", 3: "a host unreachable and none failed",
              4: "bad input (nothing was run)", 130: "interrupted"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage problem as one line and exit 4 (argparse's 2 means "host failed" here)."""

    def error(self, message):
        raise _UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def _err(msg: str) -> None:
    from fleetops.engine.clean import printable, scrub_text
    line = " ".join(str(msg).split("\n")).strip()
    print(f"fleetops: error: {printable(scrub_text(line, SECRETS))}", file=sys.stderr, flush=True)


# --- argument helpers ----------------------------------------------------------------------

def _split_tags(values) -> list:
    out = []
    for v in values or []:
        out.extend(t.strip() for t in v.split(",") if t.strip())
    return out


def _load_vars_file(path: str) -> dict:
    """`-e @file`: read as a playbook's vars_files are (positions in errors)."""
    from fleetops.engine.varsfile import load_vars_file

    if not os.path.isfile(path):
        raise BadInput("no such file", where=path)
    data = load_vars_file(path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInput("a vars file must hold a mapping of names to values", where=path)
    return data


def parse_extra_vars(items) -> dict:
    """`-e k=v [k2=v2]`, `-e @vars.yml`, `-e '{"json": 1}'`; later ones win, like Ansible."""
    out: dict = {}
    for item in items or []:
        text = item.strip()
        if not text:
            raise BadInput("empty extra variable", where="-e")
        if text.startswith("@"):
            out.update(_load_vars_file(text[1:]))
            continue
        if text[0] in "{[":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise BadInput(f"invalid JSON at column {exc.colno}: {exc.msg}", where="-e") from None
            if not isinstance(data, dict):
                raise BadInput("JSON extra variables must be an object", where="-e")
            bad = [k for k in data if not _IDENT.match(str(k))]
            if bad:
                raise BadInput(f"invalid variable name {bad[0]!r}", where="-e")
            out.update(data)
            continue
        try:
            tokens = shlex.split(text)
        except ValueError as exc:
            raise BadInput(f"cannot split: {exc}", where="-e") from None
        for tok in tokens:
            key, sep, value = tok.partition("=")
            if not sep:
                raise BadInput(f"expected key=value, @file.yml or a JSON object, got {tok[:40]!r}", where="-e")
            if not _IDENT.match(key):
                raise BadInput(f"invalid variable name {key[:40]!r}", where="-e")
            out[key] = value
    return out


def _require_file(path: str, what: str) -> None:
    if not os.path.exists(path):
        raise BadInput(f"{what} not found", where=path)
    if not os.access(path, os.R_OK):
        raise BadInput(f"{what} is not readable", where=path)


def _secret_values(inventory, extra_vars, playbook=None) -> set:
    """Every secret value a command may print (fleetops.runner.secret_values), remembered so
    that error lines are scrubbed of them too."""
    from fleetops.runner import secret_values
    values = secret_values(inventory, extra_vars, playbook)
    SECRETS.update(v for v in values if isinstance(v, str) and v)
    return values


def _console(stderr: bool = False):
    from rich.console import Console
    return Console(stderr=stderr, highlight=False)


# --- commands ------------------------------------------------------------------------------

def _ansible_cfg(args):
    """ansible.cfg as ansible-core finds it; its [defaults] inventory stands in for a missing -i."""
    from fleetops.engine.ansiblecfg import load_config

    cfg = load_config()
    if not args.inventory:
        if len(cfg.inventory) > 1:
            raise BadInput(f"ansible.cfg names {len(cfg.inventory)} inventories; fleetops reads one: give -i",
                           where=cfg.path)
        if not cfg.inventory:
            raise BadInput("no inventory: give -i/--inventory INVENTORY or set [defaults] inventory in ansible.cfg")
        args.inventory = cfg.inventory[0]
    return cfg


def cmd_run(args) -> int:
    from fleetops import bundled, runner
    from fleetops.engine.executor import RunOptions

    extra_vars = parse_extra_vars(args.extra_vars)
    cfg = _ansible_cfg(args)
    loaded = runner.load(bundled.resolve(args.playbook), args.inventory, extra_vars, limit=args.limit, note_secrets=SECRETS.update,
                         ansible_cfg=cfg, modules=registry().modules)
    if args.list_hosts or args.list_tasks:
        from fleetops.engine.listing import outline
        print(outline(loaded.playbook, loaded.inventory, args.limit, hosts=args.list_hosts, tasks=args.list_tasks,
                      only=set(_split_tags(args.tags)), skip=set(_split_tags(args.skip_tags)),
                      extra_vars=extra_vars), end="")
        return 0
    results_dir, results_db = results_target(args.results)
    gate = _batch_gate(args, results_db)
    options = RunOptions(
        limit=args.limit, tags=set(_split_tags(args.tags)), skip_tags=set(_split_tags(args.skip_tags)),
        extra_vars=extra_vars, forks=args.forks or cfg.forks or DEFAULT_FORKS, check=args.check, diff=args.diff,
        accept_new_host_keys=args.accept_new_host_keys or cfg.host_key_checking is False, results_dir=results_dir, results_db=results_db,
        known_hosts=args.known_hosts, batch_gate=gate)
    real_stdout = sys.stdout
    try:
        done = runner.execute(loaded, options, json_output=args.json, console=None if args.json else _console(),
                              view=args.view, sinks=(gate,) if hasattr(gate, "run_start") else ())
    finally:
        if hasattr(gate, "close"):
            gate.close()
    done.store.close()
    stopped = gate.stopped_reason if hasattr(gate, "stopped_reason") else None
    if stopped:
        _err(stopped)
    if getattr(gate, "cut_off", None):
        stopped = stopped or "cut off"
        _err(f"campaign {args.campaign}: {', '.join(gate.cut_off)} cut off mid-run by an earlier run of this shard, "
             "not run again: counted as failed")
    if args.json:
        real_stdout.write(json.dumps(done.view.document(), ensure_ascii=False, default=str) + "\n")
        real_stdout.flush()
    if done.store.write_error is not None:
        _err(f"{done.store.db_path}: results not fully recorded: {done.store.write_error}")
    return max(done.exit_code, EXIT_HOST_FAILED) if stopped and done.exit_code != EXIT_INTERRUPTED else done.exit_code


def _batch_gate(args, results_db):
    """--shard/--shard-from-env and --campaign: the executor's batch hook (None: the whole inventory)."""
    from fleetops.engine import shards

    if args.shard and args.shard_from_env is not None:
        raise BadInput("give --shard K/N or --shard-from-env, not both", where="--shard")
    shard = shards.parse(args.shard) if args.shard else None
    if args.shard_from_env is not None:
        shard = shards.from_env(args.shard_from_env or None, args.shard_count)
    elif args.shard_count is not None:
        raise BadInput("--shard-count goes with --shard-from-env (--shard K/N names its own count)",
                       where="--shard-count")
    if args.max_failures is not None and args.max_failures < 0:
        raise BadInput(f"--max-failures wants 0 or more, not {args.max_failures}", where="--max-failures")
    if not args.campaign:
        if args.max_failures is not None or args.count_unreachable:
            raise BadInput("--max-failures and --count-unreachable are a campaign's budget: give --campaign ID",
                           where="--max-failures" if args.max_failures is not None else "--count-unreachable")
        from fleetops.engine.batches import LocalBatches
        return LocalBatches(shard) if shard else None
    if not results_db:
        raise BadInput("a campaign is coordinated through a PostgreSQL results store: give --results "
                       "postgresql://... (or FLEETOPS_RESULTS)", where="--campaign")
    from fleetops.engine.campaign import Campaign
    return Campaign(results_db, args.campaign, shard or shards.Shard(0, 1), max_failures=args.max_failures,
                    count_unreachable=args.count_unreachable)


def _print_hosts_json(args, names, inventory, secret_values) -> None:
    """The --json document, written a host at a time: a 50,000-host fleet is never held twice
    (its variables and their text) in memory. The bytes are json.dumps' of the whole document."""
    from fleetops.engine.clean import clean

    def dumps(value):
        return json.dumps(value, ensure_ascii=False, default=str)
    out = sys.stdout
    out.write(f'{{"inventory": {dumps(args.inventory)}, "pattern": {dumps(args.limit or "all")}, "hosts": {{')
    for i, h in enumerate(names):
        out.write(f'{", " if i else ""}{dumps(h)}: {dumps(clean(inventory.get_vars(h) or {}, secret_values))}')
    out.write("}}\n")


def cmd_hosts(args) -> int:
    _require_file(args.inventory, "inventory")
    from fleetops.engine.inventory import load_inventory
    from fleetops.engine.clean import clean

    inventory = load_inventory(args.inventory)
    secret_values = _secret_values(inventory, {})
    names = inventory.select(args.limit or "all")
    if not names:
        raise BadInput(f"pattern {args.limit or 'all'!r} matches no host", where=args.inventory)
    if args.json:
        _print_hosts_json(args, names, inventory, secret_values)
        return 0
    data = {h: clean(inventory.get_vars(h) or {}, secret_values) for h in names}
    from rich.markup import escape
    console = _console()
    for h in names:
        console.print(f"[bold]{escape(h)}[/]", soft_wrap=True)
        for k in sorted(data[h]):
            v = data[h][k]
            shown = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
            console.print(f"  {escape(str(k))}: {escape(shown)}", soft_wrap=True)
    console.print(f"[dim]{len(names)} host(s)[/]")
    return 0


def cmd_playbooks(args) -> int:
    """List the bundled playbooks (what each does, the variables it takes), or copy one out."""
    from fleetops import bundled

    if args.copy:
        name, dest = args.copy
        for path in bundled.copy_out(name, dest):
            print(f"copied {path}")
        return 0
    books = bundled.playbooks()
    if args.json:
        print(json.dumps({"directory": bundled.directory(), "playbooks": [
            {"name": b.name, "path": b.path, "summary": b.summary,
             "variables": [{"name": n, "text": t} for n, t in b.variables]} for b in books]}))
        return 0
    from rich.markup import escape
    console = _console()
    for b in books:
        console.print(f"[bold]{escape(b.name)}[/]  {escape(b.summary)}", soft_wrap=True)
        for n, t in b.variables:
            console.print(f"    {escape(n)}  [dim]{escape(t)}[/]", soft_wrap=True)
    console.print(f"[dim]fleetops run NAME -i INVENTORY runs one; fleetops playbooks --copy NAME DIR copies it "
                  f"(with its templates and files) to adapt; installed in {escape(bundled.directory())}[/]",
                  soft_wrap=True)
    return 0


def version_text() -> str:
    """The package version and what it runs on: Python, paramiko, SQLite (for bug reports)."""
    import platform
    from importlib import metadata
    try:
        paramiko = metadata.version("paramiko")
    except metadata.PackageNotFoundError:
        paramiko = "missing"
    return (f"fleetops {__version__} (Python {platform.python_version()}, paramiko {paramiko}, "
            f"SQLite {sqlite3.sqlite_version})")


class _VersionAction(argparse.Action):
    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit()


def cmd_report(args) -> int:
    from fleetops import report
    from fleetops.engine.results import DB_NAME, ResultsStore

    results_dir, results_db = results_target(args.results)
    if not results_db and not os.path.exists(os.path.join(results_dir, DB_NAME)):
        raise BadInput("no runs recorded here yet (run a playbook first, or pass --results DIR)", where=results_dir)
    if args.html:
        return _report_html(args, results_dir, results_db)
    store = ResultsStore(results_dir, create=False, db_url=results_db)
    try:
        if args.list:
            runs = store.list_runs(args.limit)
            if args.json:
                print(json.dumps({"runs": runs}, ensure_ascii=False, default=str))
            else:
                report.render_list(runs, _console())
            return 0
        if args.campaign:
            from fleetops.engine.campaign_read import merged_run
            run = merged_run(store, args.campaign)
            if run is None:
                raise BadInput(f"no campaign {args.campaign!r} in {store.db_path}", where="--campaign")
        else:
            run = store.get_run(args.run_id or "latest")
        if run is None:
            if not args.run_id or args.run_id == "latest":
                raise BadInput("no runs recorded here yet (run a playbook first, or pass --results DIR)",
                               where=results_dir)
            raise BadInput(f"no run {args.run_id!r} in {store.db_path} (fleetops report --list shows them)",
                           where=args.run_id)
        sections = registry().report_sections
        if args.json:
            doc = report.document(run)
            if run.get("campaign"):
                doc["campaign"] = run["campaign"]
            for section in sections:
                doc.update(section.document(run, args))
            print(json.dumps(doc, ensure_ascii=False, default=str))
        else:
            report.render(run, _console(), extras=[lambda r, c, s=s: s.render(r, c, args) for s in sections])
    finally:
        store.close()
    return 0


def _report_html(args, results_dir: str, results_db: str | None) -> int:
    """`fleetops report --html DIR`: the static site, written from a read-only view of the store."""
    from fleetops.engine.results_read import open_reader
    from fleetops.report_site.build import build, parse_since

    try:
        since = parse_since(args.since)
    except ValueError as exc:
        raise BadInput(str(exc), where="--since") from None
    out = os.path.abspath(args.html)
    if os.path.exists(out) and not os.path.isdir(out):
        raise BadInput("--html wants a directory, and this is a file", where=out)
    with open_reader(results_dir, results_db) as reader:
        figures = build(reader, out, since=since, views=registry().site_views)
    print(f"site written to {figures['out']}/index.html: {figures['runs']} runs, {figures['files']} files,"
          f" {figures['bytes'] / 1048576:.1f} MB in {figures['seconds']:.1f} s")
    return 0


def cmd_lab(args) -> int:
    from fleetops.lab.lab import Lab
    kwargs = {}
    if args.dir:
        kwargs["state_dir"] = args.dir
    if args.prefix:
        kwargs["prefix"] = args.prefix
    lab = Lab(**kwargs)
    if args.lab_cmd == "up":
        mixed = args.with_kinds
        inv = str(lab.up(args.n, mixed=mixed or (), per_sshd=args.per_sshd)["inventory"])
        print(f"lab: {args.n} sshd host(s) up" + (f", plus mixed: {mixed}" if mixed else ""))
        print(f"inventory: {inv}")
        print(f"next: fleetops hosts -i {shlex.quote(inv)}")
        for step in registry().next_steps:
            print("      " + step.format(inventory=shlex.quote(inv)))
        return 0
    if args.lab_cmd == "down":
        print(f"lab: stopped {len(lab.down())} sshd(s)")
        return 0
    status = lab.status()
    if not status:
        print("lab: no hosts (fleetops lab up N starts some)")
    else:
        from rich.table import Table
        table = Table()
        cols = list(status[0])
        for c in cols:
            table.add_column(str(c))
        for r in status:
            table.add_row(*(str(r.get(c, "")) for c in cols))
        _console().print(table)
    inv = lab.inventory_path
    if os.path.exists(inv):
        print(f"inventory: {inv}")
    return 0


# --- parser --------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    reg = registry()
    codes = {**EXIT_CODES, **reg.exit_codes}
    p = _Parser(prog="fleetops", description=reg.description,
                epilog="exit codes: " + "; ".join(f"{c} {codes[c]}" for c in sorted(codes)))
    p.add_argument("--version", action=_VersionAction, help="the version and the Python, paramiko and SQLite it runs on")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    r = sub.add_parser("run", help="run a playbook: a file, or a bundled one by name (fleetops playbooks)", **examples(
        "fleetops run repair -i hosts.yml --check          # per host: the verdict and the path it would take",
        "fleetops run repair -i hosts.yml -e repair_serial=5 -e repair_max_fail_percentage=10",
        "fleetops run backup-units -i hosts.yml --check --diff",
        "fleetops run site.yml -i inventory/ --list-hosts --list-tasks   # what would run, as ansible-playbook lists it"))
    r.add_argument("playbook", metavar="PLAYBOOK", help="a playbook file, or the name of a bundled one (repair, ...)")
    r.add_argument("-i", "--inventory", metavar="INVENTORY", help="default: [defaults] inventory of ansible.cfg")
    r.add_argument("-l", "--limit", metavar="PATTERN")
    r.add_argument("-t", "--tags", action="append", metavar="T[,T]")
    r.add_argument("--skip-tags", action="append", metavar="T[,T]")
    r.add_argument("-e", "--extra-vars", dest="extra_vars", action="append", metavar="k=v|@file|JSON",
                   help="extra variables (repeatable): key=value, @vars.yml, or a JSON object")
    r.add_argument("-f", "--forks", type=positive_int, default=None, metavar="N",
                   help=f"hosts worked on at once (default: ansible.cfg forks, else {DEFAULT_FORKS})")
    r.add_argument("-C", "--check", action="store_true", help="change nothing; report what would change")
    r.add_argument("-D", "--diff", action="store_true", help="show diffs of edited files")
    r.add_argument("--json", action="store_true", help="one JSON document on stdout instead of the live view")
    r.add_argument("--view", choices=("auto", "hosts", "tasks"), default="auto",
                   help="live view: a line per host per task (hosts), one progress line per task with "
                        "failures as they happen (tasks), or tasks above 50 hosts (auto, the default)")
    r.add_argument("--results", metavar="DIR|URL", help=RESULTS_HELP)
    r.add_argument("--accept-new-host-keys", action="store_true",
                   help="accept and record unknown host keys (never changed ones)")
    r.add_argument("--known-hosts", metavar="FILE", help="known_hosts file (default ~/.ssh/known_hosts)")
    r.add_argument("--list-hosts", action="store_true", help="print the hosts each play would run on, as ansible-playbook does; run nothing")
    r.add_argument("--list-tasks", action="store_true", help="print the tasks each play would run, as ansible-playbook does; run nothing")
    r.add_argument("--shard", metavar="K/N", help="run only the hosts shard K (from 0) of N owns, by a stable "
                   "hash of inventory_hostname; an empty shard runs nothing and exits 0")
    r.add_argument("--shard-from-env", nargs="?", const="", metavar="VAR",
                   help="the shard index from $VAR, else JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or "
                        "NOMAD_ALLOC_INDEX; with --shard-count N")
    r.add_argument("--shard-count", type=positive_int, metavar="N", help="with --shard-from-env: how many shards")
    r.add_argument("--campaign", metavar="ID", help="one rollout across every shard started with this id: "
                   "batches, canary and max_fail_percentage fleet-wide, through the PostgreSQL --results store")
    r.add_argument("--max-failures", type=int, metavar="N",
                   help="with --campaign: stop every shard before its next batch once more than N hosts failed")
    r.add_argument("--count-unreachable", action="store_true",
                   help="with --campaign: --max-failures counts unreachable hosts too")
    r.set_defaults(func=cmd_run)

    pb = sub.add_parser("playbooks", help="the bundled playbooks: what each does and takes; --copy one out", **examples(
        "fleetops playbooks                    # each bundled playbook and the variables it takes",
        "fleetops playbooks --copy repair ./mine/   # repair.yml with its templates and files, to adapt"))
    pb.add_argument("--copy", nargs=2, metavar=("NAME", "DIR"), help="copy bundled playbook NAME into DIR")
    pb.add_argument("--json", action="store_true")
    pb.set_defaults(func=cmd_playbooks)

    h = sub.add_parser("hosts", help="matched hosts and their resolved variables (secrets masked)", **examples(
        "fleetops hosts -i inventory/ -l 'gateways:&eu'",
        "fleetops hosts -i hosts.yml --json"))
    h.add_argument("-i", "--inventory", required=True, metavar="INVENTORY")
    h.add_argument("-l", "--limit", metavar="PATTERN")
    h.add_argument("--json", action="store_true")
    h.set_defaults(func=cmd_hosts)

    rp = sub.add_parser("report", help="render a past run from the results store", **examples(
        "fleetops report latest --audit        # the last run, with the fleet's database health and its trend",
        "fleetops report --list --limit 5",
        "fleetops report --html ./site --since 7d   # a static site: open site/index.html, offline"))
    rp.add_argument("run_id", nargs="?", default="latest", metavar="RUN_ID|latest")
    rp.add_argument("--json", action="store_true")
    rp.add_argument("--results", metavar="DIR|URL", help=RESULTS_HELP)
    rp.add_argument("--list", action="store_true", help="list recent runs")
    rp.add_argument("--limit", type=positive_int, default=20, metavar="N", help="with --list: how many")
    rp.add_argument("--html", metavar="DIR", help="write a static site of runs, hosts and fleet health into DIR")
    rp.add_argument("--since", metavar="WHEN", help="with --html: runs started since a date/time or an age (7d, 12h)")
    rp.add_argument("--campaign", metavar="ID", help="the runs of every shard of campaign ID, as one run")
    for add in reg.report_options:
        add(rp)
    rp.set_defaults(func=cmd_report)

    lab = sub.add_parser("lab", help="a local demo fleet of real sshd servers", **examples(
        "fleetops lab up 6                     # six sshd hosts on 127.0.0.1, one Unix user each (root)",
        "fleetops lab status",
        "fleetops lab down"))
    lab_sub = lab.add_subparsers(dest="lab_cmd", metavar="up|down|status", required=True)
    for name, helptext in (("up", "start N sshd hosts"), ("down", "stop them"), ("status", "show them")):
        lp = lab_sub.add_parser(name, help=helptext)
        if name == "up":
            lp.add_argument("n", type=positive_int, metavar="N")
            lp.add_argument("--per-sshd", type=positive_int, metavar="K",
                            help="hosts per sshd process (default 1 up to 64 hosts, else 16); each host "
                                 "keeps its own port and user")
            lp.add_argument("--with", dest="with_kinds", metavar="KIND[,KIND]",
                            help="also start chrooted hosts of other kinds: aarch64 (arm01, qemu "
                                 "user-mode), oldstable (old01, Debian bullseye); the first use builds "
                                 "their root file systems (minutes), later ones reuse the cache")
        lp.add_argument("--dir", metavar="D", help="lab state directory")
        lp.add_argument("--prefix", metavar="P", help="host/user name prefix")
        lp.set_defaults(func=cmd_lab)

    for add in reg.commands:
        add(sub)
    return p


def main(argv=None) -> int:
    """Entry point of the console script and `python -m fleetops`; returns the exit code."""
    SECRETS.clear()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    except SystemExit as exc:           # --help, --version
        return int(exc.code or 0)
    debug = bool(os.environ.get("FLEETOPS_DEBUG"))
    try:
        return int(args.func(args))
    except BadInput as exc:
        _err(str(exc))
        return EXIT_BAD_INPUT
    except FleetopsError as exc:
        _err(str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:             # `fleetops report | head`: the reader left, nothing to say
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_UNEXPECTED
    except OSError as exc:
        if debug:
            traceback.print_exc()
        where = exc.filename or "fleetops"
        reason = exc.strerror or str(exc)
        if exc.errno == errno.ENOSPC:
            reason = "no space left on device"
        _err(f"{where}: {reason}")
        return EXIT_BAD_INPUT
    except store_errors() as exc:
        if debug:
            traceback.print_exc()
        _err(f"results store: {exc}")
        return EXIT_BAD_INPUT
    except Exception as exc:
        if debug:
            traceback.print_exc()
        _err(f"unexpected {type(exc).__name__}: {exc} (run with FLEETOPS_DEBUG=1 for the traceback)")
        return EXIT_UNEXPECTED
