"""Payload: a background job's state (ansible.builtin.async_status): `status` reads the job's
result file as ansible-core's module does, `cleanup` removes it."""
from __future__ import annotations

import json
import os

from fleetops.remote.host.async_job import job_path


def main(args: dict) -> dict:
    jid = args.get("jid")
    try:
        path = job_path(jid)
    except ValueError as e:
        return {"failed": True, "changed": False, "msg": str(e)}
    if not os.path.exists(path):
        return {"failed": True, "changed": False, "msg": "could not find job", "ansible_job_id": jid,
                "started": True, "finished": True}
    if args.get("mode") == "cleanup":
        os.unlink(path)
        return {"changed": False, "failed": False, "ansible_job_id": jid, "erased": path}
    try:
        with open(path) as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError):
        return {"changed": False, "failed": False, "results_file": path, "ansible_job_id": jid,
                "started": True, "finished": False}
    if "started" not in data:
        data["finished"] = True
        data["ansible_job_id"] = jid
    elif "finished" not in data:
        data["finished"] = False
    data["results_file"] = path
    data.setdefault("started", True)
    return data
