"""The fleet's audit cost line: what the audit cost each host, from the payload's own figures."""
from __future__ import annotations

from fleetops.hermes.audit import audit_cost, cost_summary


def _row(host, seconds, checks):
    return {"host": host, "profile": "default", "cost": audit_cost({"elapsed": seconds, "checks": checks})}


def test_the_line_names_the_median_the_costliest_store_and_the_reads():
    rows = [_row("a", 0.5, {"integrity": {"cpu_seconds": 0.3, "read_bytes": 10**9}}),
            _row("b", 2.0, {"integrity": {"cpu_seconds": 1.0, "read_bytes": 2 * 10**9},
                            "fts:x": {"cpu_seconds": 0.5, "read_bytes": 0}}),
            _row("c", 1.0, {"integrity": {"cpu_seconds": 0.2, "read_bytes": 0}}),
            {"host": "d", "profile": "*", "cost": None}]                     # unreachable: no figures
    assert cost_summary(rows) == ("audit cost: 3 stores, 1.00 s median, 2.00 s most (b default), "
                                  "2.00 CPU s of checks, 3.00 GB read from disk")


def test_reads_a_host_could_not_measure_are_not_summed_as_zero():
    rows = [_row("a", 0.5, {"integrity": {"cpu_seconds": 0.3, "read_bytes": None}}),
            _row("b", 0.7, {"integrity": {"cpu_seconds": 0.3, "read_bytes": 5}})]
    assert rows[0]["cost"]["read_bytes"] is None
    assert cost_summary(rows).endswith("disk reads unmeasured")
    assert "0.60 s median" in cost_summary(rows)


def test_no_line_without_a_measured_store():
    assert cost_summary([{"host": "d", "profile": "*", "cost": None}]) is None
    assert cost_summary([]) is None
