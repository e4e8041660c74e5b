"""Controller side of the repair: one thin module per host step.

Each module declares its arguments (validated before any host is contacted), calls its host
payload (fleetops/remote/hermes/*.py, one round trip) with the right action, passes check
mode through, and keeps what the step produced on the host -- snapshot and quarantine
manifests, the repair report, the stop record (without environment values), swap and verify
results -- in the run's results folder, `<results>/<run-id>/<host>/hermes/<profile>/`, so a
run's evidence stays with the run even when the host later fails.

Every payload gets the run id (`fleetops_run_id`): the host lease taken by
`hermes_hostlock action=acquire` lets only that run's steps through.
"""
from __future__ import annotations

import json
import os

from fleetops.engine.module import Arg, Module, TaskContext, flag, result
from fleetops.engine.connection.runlock import PS_HOLDERS, holder_in_args

NUM = (int, float, str)
BOOL = (bool, str)


def _save(ctx: TaskContext, profile: str, name: str, data) -> str | None:
    """Write one step's evidence as JSON into the run's host folder (never in check mode)."""
    if ctx.check or data is None:
        return None
    d = os.path.join(ctx.host_dir, "hermes", str(profile or "default"))
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name)
    tmp = path + ".tmp"
    text = json.dumps(data, indent=1, sort_keys=True, default=str)
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(ctx.scrub(text))
    os.replace(tmp, path)
    return path


class _Step(Module):
    """Shared arguments and the payload call (the payload named after the module); subclasses set
    `action`, `args`."""

    action: str | None = None
    common = {
        "profile": Arg(str, default="default"),
        "hermes_home": Arg(str, default=None),
        "run_id": Arg(str, default=None),
        "holder_scan": Arg(str, default=None, choices=("strict", "owner")),
        "allow_symlink": Arg(BOOL, default=None),
        "timeout": Arg((int, float), default=None),
    }

    def pargs(self, ctx: TaskContext, args: dict) -> dict:
        out = {k: v for k, v in args.items() if v not in (None, "") and k != "timeout"}
        # A state.db symlinked out of the Hermes home is refused by every step unless told,
        # per task or for the whole play with the host variable hermes_allow_symlink.
        allow = args.get("allow_symlink")
        if allow in (None, ""):
            allow = (ctx.variables or {}).get("hermes_allow_symlink", False)
        out["allow_symlink"] = flag(allow)
        out["run_id"] = args.get("run_id") or ctx.run_id
        if self.action:
            out.setdefault("action", self.action)
        return out

    def call(self, ctx: TaskContext, args: dict, pargs: dict | None = None, name: str | None = None) -> dict:
        res = ctx.payload(name or self.name, pargs if pargs is not None else self.pargs(ctx, args),
                          timeout=args.get("timeout"))
        if not isinstance(res, dict):
            return result(failed=True, msg=f"{self.name}: payload returned {type(res).__name__}")
        res.setdefault("msg", "")
        res["profile"] = args.get("profile") or "default"
        return res


def _args(**own) -> dict:
    a = dict(_Step.common)
    a.update(own)
    return a


class HermesSnapshot(_Step):
    """Consistent copy of state.db through the backup API, while Hermes still runs; refuses
    (before anything is stopped) when free space is short."""

    name = "hermes_snapshot"
    args = _args(min_free_factor=Arg(NUM, default=None), dest=Arg(str, default=None), label=Arg(str, default=None))

    def run(self, ctx, args):
        res = self.call(ctx, args)
        if res.get("refused") and res.get("reason") == "free_space":
            res["msg"] = "refused (free space): " + res["msg"]
        _save(ctx, args.get("profile"), "snapshot-manifest.json", res.get("manifest"))
        return res


class HermesStopWriters(_Step):
    """Stop every process holding state.db (units, `hermes gateway stop`, signals, respawns caught);
    refuses, stopping nothing, when a holder is not Hermes."""

    name = "hermes_stop_writers"
    args = _args(quiet_window=Arg(NUM, default=None), deadline=Arg(NUM, default=None), grace=Arg(NUM, default=None),
                 force=Arg(BOOL, default=None), systemd=Arg(str, default=None), hermes_bin=Arg(str, default=None),
                 restart_on_failure=Arg(BOOL, default=None), fence=Arg(BOOL, default=None),
                 fence_ttl=Arg(NUM, default=None))

    def run(self, ctx, args):
        pargs = self.pargs(ctx, args)
        if pargs.get("hermes_bin") and "/" not in pargs["hermes_bin"]:
            pargs.pop("hermes_bin")  # a bare name: derive `hermes` from each holder's own command line
        res = self.call(ctx, args, pargs)
        if res.get("refused"):
            res["msg"] = "refused: " + res["msg"]
        _save(ctx, args.get("profile"), "writers-stop.json",
              {k: res.get(k) for k in ("msg", "stopped", "respawns", "respawn_count", "respawn_pids", "fence",
                                       "fenced_holders", "record", "foreign", "remaining", "restart")})
        return res


class HermesStartWriters(_Step):
    """Restart what hermes_stop_writers recorded, gateway first, and wait until it holds state.db."""

    name = "hermes_start_writers"
    args = _args(wait_timeout=Arg(NUM, default=None), systemd=Arg(str, default=None))

    def run(self, ctx, args):
        res = self.call(ctx, args)
        if not ctx.check and (res.get("started") or res.get("errors")):
            _save(ctx, args.get("profile"), "writers-start.json",
                  {k: res.get(k) for k in ("msg", "started", "errors")})
        return res


class HermesQuarantine(_Step):
    """Copy the three-file image aside (~/.hermes/fleetops/quarantine/<ts>/) with a sha256 manifest."""

    name = "hermes_quarantine"
    args = _args(force=Arg(BOOL, default=None))

    def run(self, ctx, args):
        res = self.call(ctx, args)
        _save(ctx, args.get("profile"), "quarantine-manifest.json", res.get("manifest"))
        return res


class HermesRepair(_Step):
    """Audit the quarantined image offline, rebuild FTS or salvage into a new file, verify it;
    on refusal nothing is swapped and what was running is restarted on the original file."""

    name = "hermes_repair"
    args = _args(quarantine_dir=Arg(str, default=None), max_loss_rows=Arg((int, str), default=None),
                 fts=Arg(str, default=None, choices=("rebuild", "leave-to-hermes")),
                 schema_from=Arg(str, default=None), restart_on_refusal=Arg(BOOL, default=None))

    def run(self, ctx, args):
        res = self.call(ctx, args)
        report = res.pop("report", None)
        path = _save(ctx, args.get("profile"), "repair-report.json", report)
        if report:
            res["report_summary"] = {k: report.get(k) for k in (
                "verdict", "path", "result", "loss_rows", "expect_counts", "identified_counts", "work_dir",
                "new_sha256", "quarantine_dir")}
            if isinstance(report.get("salvage"), dict):
                res["report_summary"]["salvage"] = {k: report["salvage"].get(k) for k in (
                    "verdict", "loss_rows", "identified_rows", "saved_rows")}
            if isinstance(report.get("retired_wal"), dict):
                res["report_summary"]["retired_wal"] = report["retired_wal"].get("summary")
        if path:
            res["report_fetched"] = path
        res.setdefault("swap", False)
        return res


class HermesSwap(_Step):
    """action swap: move the quarantined original aside and the verified new file in (journalled);
    action recover: finish or undo an interrupted swap, and say whether writers are still
    recorded as stopped by an earlier run (they must be restarted)."""

    name = "hermes_swap"
    action = "swap"
    args = _args(action=Arg(str, default="swap", choices=("swap", "recover")), new_db=Arg(str, default=None),
                 expect_sha256=Arg(str, default=None), quarantine_dir=Arg(str, default=None),
                 prefer=Arg(str, default=None, choices=("finish", "rollback")), force=Arg(BOOL, default=None))

    def run(self, ctx, args):
        pargs = self.pargs(ctx, args)
        res = self.call(ctx, args, pargs)
        if args.get("action") == "recover":
            w = self.call(ctx, args, {"action": "start", "profile": pargs.get("profile") or "default",
                                      "hermes_home": pargs.get("hermes_home"), "run_id": pargs["run_id"],
                                      "_check": True}, name="hermes_start_writers")
            # refused (a swap still pending, only in check mode) counts as "stopped": fail safe
            res["writers_stopped"] = bool(w.get("recorded") or w.get("refused"))
            res["writers_record"] = w.get("record_status")
            if res.get("recovered"):
                _save(ctx, args.get("profile"), "swap-recovered.json", res.get("recovered"))
        else:
            _save(ctx, args.get("profile"), "swap.json", res.get("swap"))
        if res.get("refused") and not res["msg"].startswith("refus"):
            res["msg"] = "refused: " + res["msg"]
        return res


class HermesVerify(_Step):
    """Write-then-read probe, quick_check, counts as the repair reported, FTS answers, and the
    real `hermes sessions stats` where hermes is installed."""

    name = "hermes_verify"
    args = _args(expect_counts=Arg(dict, default=None), count_mode=Arg(str, default=None,
                                                                        choices=("at_least", "exact")),
                 hermes_bin=Arg(str, default=None), hermes_env=Arg(dict, default=None),
                 busy_timeout=Arg(NUM, default=None), hermes_timeout=Arg(NUM, default=None))

    def run(self, ctx, args):
        pargs = self.pargs(ctx, args)
        if pargs.get("hermes_bin") == "hermes":
            pargs.pop("hermes_bin")  # the default: `hermes` on the host's PATH if there is one, else skipped
        res = self.call(ctx, args, pargs)
        _save(ctx, args.get("profile"), "verify.json", {k: res.get(k) for k in ("msg", "checks", "problems")})
        return res


class HermesRollback(_Step):
    """Put the quarantined original back exactly (sha256 checked); what is there now is moved aside."""

    name = "hermes_rollback"
    args = _args(quarantine_dir=Arg(str, default=None), force=Arg(BOOL, default=None))

    def run(self, ctx, args):
        pargs = self.pargs(ctx, args)
        res = self.call(ctx, args, pargs)
        _save(ctx, args.get("profile"), "rollback.json", res.get("rollback"))
        return res


class HermesHostlock(Module):
    """The run's lease on the host (~/.hermes/fleetops/lock): acquire / release / status.

    take_over_dead_runs: a lease left by a run whose controller died (SIGKILL, lost connection)
    would refuse every later run until it expires. The engine holds a run lock on the host
    account for as long as a run's connection lives (engine/connection/runlock.py, the holder's command
    line names its run id); when this run holds it and the lease's run holds none, that run
    is gone and its lease is released, saying so.
    """

    name = "hermes_hostlock"
    args = {
        "action": Arg(str, default="acquire", choices=("acquire", "release", "status")),
        "run_id": Arg(str, default=None),
        "hermes_home": Arg(str, default=None),
        "ttl": Arg(NUM, default=None),
        "wait": Arg(NUM, default=None),
        "take_over_dead_runs": Arg(BOOL, default=True),
        "timeout": Arg((int, float), default=None),
    }

    def _payload(self, ctx, args, **kw):
        p = {k: args.get(k) for k in ("hermes_home", "ttl", "wait") if args.get(k) not in (None, "")}
        p.update(kw)
        return ctx.payload("hermes_hostlock", p, timeout=args.get("timeout"))

    def _live_runs(self, ctx) -> set | None:
        """Run ids holding the engine's run lock on this host account; None when that cannot be told."""
        res = ctx.transport.run(PS_HOLDERS, timeout=30)
        if res.rc != 0:
            return None
        records = (holder_in_args(line) for line in res.stdout.decode("utf-8", "replace").splitlines())
        return {str(rec["run_id"]) for rec in records if rec.get("run_id")}

    def run(self, ctx, args):
        run_id = args.get("run_id") or ctx.run_id
        action = args.get("action") or "acquire"
        res = self._payload(ctx, args, action=action, run_id=run_id, purpose="fleetops repair")
        if action != "acquire" or ctx.check or not res.get("refused"):
            return res
        other = (res.get("lock_holder") or {}).get("run_id")
        if not other or other == run_id or not flag(args.get("take_over_dead_runs", True)):
            return res
        live = self._live_runs(ctx)
        if live is None or run_id not in live:
            res["msg"] += " (cannot tell whether run %s is still alive: this host shows no run lock)" % other
            return res
        if other in live:
            return res
        rel = self._payload(ctx, args, action="release", run_id=other)
        if rel.get("failed"):
            return res
        again = self._payload(ctx, args, action="acquire", run_id=run_id, purpose="fleetops repair")
        if not again.get("failed"):
            again["took_over"] = other
            again["msg"] = (f"{again.get('msg')}; took over the lease of run {other}, whose controller is gone "
                            f"(it holds no run lock on this host)")
        return again
