"""The controller's side of `async:` (engine/asyncjob.py) with the host's payloads faked: the poll
loop's budget and ansible-core's messages, fire and forget, the cleanup of a finished job."""
from __future__ import annotations

import pytest

from fleetops.engine.asyncjob import AsyncFailed, AsyncJob, AsyncStarted


class NoWait:
    """A stop event whose wait returns at once (the unit test fakes the clock, not the logic)."""

    def __init__(self):
        self.waits = []

    def wait(self, seconds):
        self.waits.append(seconds)
        return False


def _host(statuses):
    calls = []

    def call(name, args):
        calls.append((name, dict(args)))
        if name == "async_job":
            return {"started": True, "finished": False, "ansible_job_id": args["jid"],
                    "results_file": f"/home/u/.ansible_async/{args['jid']}"}
        if args.get("mode") == "cleanup":
            return {"erased": "x"}
        return statuses.pop(0) if statuses else {"started": True, "finished": False}
    return call, calls


def test_a_job_still_running_when_the_budget_is_spent_fails_with_ansible_cores_message():
    call, calls = _host([])
    stop = NoWait()
    job = AsyncJob(seconds=5, poll=2, call=call, stop=stop)
    with pytest.raises(AsyncFailed) as exc:
        job.run("sleep 99")
    assert exc.value.result["msg"] == "async task did not complete within the requested time - 5s"
    assert exc.value.result["failed"] and exc.value.result["async_result"]["finished"] is False
    assert stop.waits == [2, 2, 2]            # as ansible-core: time_left 5 -> 3 -> 1 -> -1
    assert [n for n, _ in calls].count("async_status") == 3


def test_a_finished_job_is_handed_back_and_its_file_removed():
    call, calls = _host([{"started": True, "finished": False},
                         {"finished": True, "rc": 3, "stdout": "out\n", "stderr": ""}])
    job = AsyncJob(seconds=30, poll=1, call=call, stop=NoWait())
    res = job.run("false", stdin=b"data")
    assert (res.rc, res.stdout) == (3, b"out\n")
    assert calls[-1][1]["mode"] == "cleanup" and calls[0][1]["stdin"] == "ZGF0YQ=="
    assert job.info["finished"] is True and job.info["ansible_job_id"].startswith("j")


def test_poll_zero_returns_the_job_at_once():
    call, calls = _host([])
    with pytest.raises(AsyncStarted) as exc:
        AsyncJob(seconds=30, poll=0, call=call, stop=NoWait()).run("sleep 5")
    got = exc.value.result
    assert got["started"] is True and got["finished"] is False and got["changed"] is True
    assert got["results_file"].endswith(got["ansible_job_id"]) and len(calls) == 1


def test_a_job_killed_at_its_limit_on_the_host_is_a_failure():
    call, _ = _host([{"msg": "Timeout exceeded", "failed": True, "child_pid": 7, "finished": True}])
    with pytest.raises(AsyncFailed) as exc:
        AsyncJob(seconds=3, poll=5, call=call, stop=NoWait()).run("sleep 30")
    assert exc.value.result["msg"] == "Timeout exceeded" and exc.value.result["finished"] is True
