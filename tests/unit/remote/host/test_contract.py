"""The host's one result builder, and the payloads built on it, give the controller's contract shape."""
from __future__ import annotations

from fleetops.engine.module import result as controller_result
from fleetops.remote.host import cron, dnf
from fleetops.remote.host.contract import result


def test_a_result_has_the_four_contract_keys_first_then_its_own():
    out = result(changed=1, msg="done", rc=0)
    assert list(out) == ["changed", "failed", "skipped", "msg", "rc"]
    assert out == {"changed": True, "failed": False, "skipped": False, "msg": "done", "rc": 0}


def test_the_host_and_the_controller_build_the_same_dict():
    for kw in ({}, {"failed": True, "msg": "x"}, {"skipped": 1, "extra": [1]}, {"changed": "yes"}):
        assert result(**kw) == controller_result(**kw)


def test_payload_results_go_through_it():
    assert dnf._result(failed=True, msg="no")["rc"] == 1
    assert list(dnf._result())[:4] == ["changed", "failed", "skipped", "msg"]
    assert cron.main({"name": "x", "state": "bogus"})["failed"] is True
