"""`cron`: one entry of the remote user's crontab, kept idempotently by a marker comment.

All host work is one `cron` payload call: it reads `crontab -l`, sets or removes
the line after `# fleetops: NAME`, writes only when something differs, and returns a
unified diff under --diff. Other lines of the user's crontab are never touched.
"""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext, result

SCHEDULE = ("minute", "hour", "day", "month", "weekday")


class Cron(Module):
    name = "cron"
    args = {
        "name": Arg(str, required=True),          # the marker: `# fleetops: NAME`
        "job": Arg(str),
        "minute": Arg((str, int), default="*"),
        "hour": Arg((str, int), default="*"),
        "day": Arg((str, int), default="*"),
        "month": Arg((str, int), default="*"),
        "weekday": Arg((str, int), default="*"),
        "special_time": Arg(str, choices=("reboot", "yearly", "annually", "monthly", "weekly",
                                          "daily", "hourly", "midnight")),
        "state": Arg(str, default="present", choices=("present", "absent")),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        if args.get("state", "present") == "present" and not args.get("job"):
            return result(failed=True, msg="job is required when state is present")
        pargs = {k: args.get(k) for k in ("name", "job", "special_time", "state")}
        for k in SCHEDULE:
            if args.get(k) is not None:
                pargs[k] = str(args[k])
        res = ctx.payload("cron", pargs)
        if not ctx.diff:
            res.pop("diff", None)
        return res
