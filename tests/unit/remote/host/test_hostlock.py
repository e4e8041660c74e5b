"""The host lock: a second fleetops run on the same host refuses instead of interleaving."""
from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys

import pytest

from fleetops.remote.hermes import hostlock as hermes_hostlock
from fleetops.remote.hermes import snapshot as hermes_snapshot
from fleetops.remote.host import hostlock

from tests.support.hermes_procs import REPO

MINE = ["host/hostlock", "hermes/hostlock", "hermes/snapshot", "hermes/steplib", "hermes/writers",
        "hermes/stop_writers", "hermes/start_writers", "hermes/image_swap", "hermes/swap", "hermes/repair",
        "hermes/verify"]


def test_payload_sources_parse_as_python38():
    for name in MINE:
        src = (REPO / "fleetops" / "remote" / (name + ".py")).read_text()
        ast.parse(src, feature_version=(3, 8))  # rejects match statements, walrus-free is not required
        assert "removeprefix" not in src and "removesuffix" not in src


def _holder_process(path):
    """Another process holding the flock until its stdin closes."""
    code = ("import sys; from fleetops.remote.host import hostlock; "
            "lk = hostlock.acquire(sys.argv[1], purpose='test holder'); print('held', flush=True); "
            "sys.stdin.read(); lk.release()")
    p = subprocess.Popen([sys.executable, "-c", code, path], cwd=str(REPO), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert p.stdout.readline().strip() == b"held"
    return p


def test_second_concurrent_holder_is_refused_naming_the_first(tmp_path):
    path = str(tmp_path / "h" / "fleetops" / "lock")
    p = _holder_process(path)
    try:
        with pytest.raises(hostlock.Locked) as ei:
            hostlock.acquire(path, purpose="second")
        assert "pid %d" % p.pid in str(ei.value)
        assert ei.value.holder["purpose"] == "test holder"
        # a repair payload refuses the same way, changing nothing
        home = tmp_path / "h"
        (home / "state.db").write_bytes(b"")
        r = hermes_snapshot.main({"hermes_home": str(home), "min_free_factor": 0})
        assert r["failed"] and r.get("refused") and "pid %d" % p.pid in r["msg"]
        assert not (home / "fleetops" / "snapshots").exists()
    finally:
        p.stdin.close()
        p.wait(timeout=30)
    lk = hostlock.acquire(path, purpose="after")  # free once the holder is gone
    lk.release()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700


def test_a_crashed_holder_releases_the_flock(tmp_path):
    path = str(tmp_path / "lock")
    p = _holder_process(path)
    p.kill()
    p.wait(timeout=30)
    hostlock.acquire(path).release()


def test_run_lease_spans_payloads_and_refuses_other_runs(tmp_path):
    path = str(tmp_path / "lock")
    hostlock.acquire(path, run_id="run-A", ttl=600).release()
    hostlock.acquire(path, run_id="run-A", ttl=600).release()  # the same run, next payload: fine
    with pytest.raises(hostlock.Locked) as ei:
        hostlock.acquire(path, run_id="run-B")
    assert "run-A" in str(ei.value)
    with pytest.raises(hostlock.Locked):
        hostlock.acquire(path)  # a run without an id is refused by the lease too
    st = hostlock.status(path)
    assert st["lease"]["run_id"] == "run-A" and not st["held"]
    assert hostlock.release_lease(path, "run-B") is False
    assert hostlock.release_lease(path, "run-A") is True
    hostlock.acquire(path, run_id="run-B").release()


def test_expired_lease_is_taken_over_and_said_so(tmp_path):
    path = str(tmp_path / "lock")
    lk = hostlock.acquire(path, run_id="dead-run", ttl=10, now=1000.0)
    lk.release()
    lk = hostlock.acquire(path, run_id="new-run", ttl=10, now=2000.0)
    assert lk.record["took_over_expired"] == "dead-run"
    lk.release()


def test_lock_payload_actions(tmp_path):
    a = {"hermes_home": str(tmp_path), "run_id": "r1"}
    r = hermes_hostlock.main(dict(a, action="acquire"))
    assert r["changed"] and not r["failed"]
    r2 = hermes_hostlock.main({"hermes_home": str(tmp_path), "run_id": "r2", "action": "acquire"})
    assert r2["failed"] and r2["refused"] and "r1" in r2["msg"]
    assert hermes_hostlock.main(dict(a, action="status"))["status"]["lease"]["run_id"] == "r1"
    assert hermes_hostlock.main(dict(a, action="release"))["changed"]
    assert not hermes_hostlock.main(r2 and {"hermes_home": str(tmp_path), "run_id": "r2", "action": "acquire"})["failed"]


@pytest.mark.parametrize("module", ["hermes_snapshot", "hermes_stop_writers", "hermes_swap", "hermes_repair",
                                    "hermes_verify", "hermes_hostlock"])
def test_payloads_run_through_the_bundler(tmp_path, module):
    """Each payload travels as a bundle and runs under `python3 -I` with only its bundled siblings."""
    from fleetops.engine.connection.local import LocalTransport
    from fleetops.engine.payload import run_payload
    t = LocalTransport()
    t.connect()
    try:
        r = run_payload(t, module, {"hermes_home": str(tmp_path), "_check": True})
    finally:
        t.close()
    assert isinstance(r, dict) and "msg" in r and "Traceback" not in r["msg"], r
    assert not (tmp_path / "fleetops").exists()
