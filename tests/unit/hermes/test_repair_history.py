"""repair_history: outcomes read back from a real runs.db, written through ResultsStore's own
event methods (the module results are made up here; the lab tests use real runs)."""
from __future__ import annotations

import sqlite3

from fleetops.engine.results import ResultsStore
from fleetops.hermes.repair_history import load_repairs


def _run(store, run_id, rows, check=False):
    store.run_start(run_id, "playbooks/repair.yml", "inv.yml", {"check": check})
    store.play_start(0, "repair", sorted({r[0] for r in rows}))
    for i, (host, module, result) in enumerate(rows):
        store.host_result(host, 0, i, f"task {i}", module, result, 0.0, 0.1)
    store.run_end("ok", {}, 0)


def test_outcomes(tmp_path):
    store = ResultsStore(tmp_path)
    item = {"profile": "default", "changed": True, "failed": False}
    _run(store, "20260101T000000Z-aaaaaa", [
        # repaired: salvage, swapped, verified
        ("h1", "hermes_stop_writers", {"results": [dict(item)]}),
        ("h1", "hermes_repair", {"results": [dict(item, path="salvage", verdict="structural_corruption",
                                                  loss_rows=2, swap=True)]}),
        ("h1", "hermes_swap", {"results": [dict(item, swap={"new_sha256": "x"}, r={"profile": "default"})]}),
        ("h1", "hermes_verify", {"results": [dict(item, changed=False)]}),
        # the quarantined image needed nothing: not swapped, host ok
        ("h2", "hermes_stop_writers", {"results": [dict(item)]}),
        ("h2", "hermes_repair", {"results": [dict(item, changed=False, path="none", verdict="healthy", swap=False)]}),
        ("h2", "hermes_swap", {"results": [{"skipped": True, "changed": False, "r": {"profile": "default"}}]}),
        # healthy, never touched: left out
        ("h3", "hermes_stop_writers", {"results": [{"skipped": True, "changed": False, "profile": "default"}]}),
        # unreachable at the first step
        ("h4", "hermes_hostlock", {"unreachable": True, "msg": "connection refused"}),
    ])
    _run(store, "20260101T000001Z-bbbbbb", [("h1", "hermes_stop_writers", {"results": [dict(item)]}),
                                            ("h1", "hermes_rollback", {"results": [dict(item)]})], check=True)
    store.close()
    c = sqlite3.connect(tmp_path / "runs.db")
    rows = {(r["run_id"][-6:], r["host"]): r for r in load_repairs(c, "20260101T999999Z")}
    c.close()
    assert set(rows) == {("aaaaaa", "h1"), ("aaaaaa", "h2"), ("aaaaaa", "h4")}  # the --check run left out
    h1 = rows[("aaaaaa", "h1")]
    assert (h1["outcome"], h1["path"], h1["verdict_before"], h1["loss_rows"]) == (
        "REPAIRED", "salvage", "structural_corruption", 2)
    assert rows[("aaaaaa", "h2")]["outcome"] == "NOT SWAPPED"
    h4 = rows[("aaaaaa", "h4")]
    assert (h4["outcome"], h4["profile"], h4["detail"]) == ("UNREACHABLE", None, "connection refused")
