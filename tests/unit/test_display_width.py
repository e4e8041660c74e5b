"""The audit, repairs and run-list tables at 80 and 200 columns: summary first, ids whole, nothing wider.

Rows come from a real `hermes_audit` payload result on the corpus store (healthy) and a damaged
copy, plus an unreachable host with ssh's own message; a long fleet host name as real fleets have.
"""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from fleetops.hermes.audit import print_fleet, rows_from
from fleetops.hermes.repair_history import repairs_table
from fleetops.report import render_list

LONG = "hermes-0042.eu-west-1.fleet.example"
RUN = "20261130T080000Z-a1b2c3"


@pytest.fixture(scope="module")
def rows(std_src, tmp_path_factory):
    from fleetops.remote.hermes import audit as hermes_audit
    from tests.corpus import damage

    bad = damage.make("garbage_leaf_pages", std_src, tmp_path_factory.mktemp("bad") / "state.db")
    res = {LONG: hermes_audit.main({"db_path": str(std_src), "holders": False, "services": False}),
           "lab02": hermes_audit.main({"db_path": str(bad.path), "holders": False, "services": False}),
           "lab03": {"unreachable": True, "msg": "ssh: connect to host 127.0.0.1 port 2203: Connection refused"}}
    return rows_from(res)


def printed(fn, width: int) -> list:
    buf = io.StringIO()
    fn(Console(file=buf, width=width, color_system=None, force_terminal=False))
    return buf.getvalue().splitlines()


def cells(line: str) -> list:
    return [w for w in line.split() if w not in ("│", "┃")]


@pytest.mark.parametrize("width", [80, 200])
def test_fleet_table(rows, width):
    lines = printed(lambda c: print_fleet(rows, c), width)
    assert lines[0].startswith("3 databases on 3 hosts: 1 structural_corruption, 1 unreachable")
    assert all(len(ln) <= width for ln in lines), [ln for ln in lines if len(ln) > width]
    for host in (LONG, "lab02", "lab03"):
        assert any(cells(ln)[:1] == [host] and len(cells(ln)) > 3 for ln in lines), (host, lines)
    header = next(ln for ln in lines if "verdict" in ln)
    cost = " ".join(lines[next(i for i, ln in enumerate(lines) if ln.startswith("audit cost: ")):])
    assert cost.startswith("audit cost: 2 stores, ") and "CPU s of checks" in cost     # the unreachable host has none
    if width == 80:
        assert "holders" not in header and "warnings" not in header
        # the columns left out come back under the table, for the rows that are not healthy
        assert any(ln.startswith("lab03 *: holders ssh: connect to host") for ln in lines), lines
        assert not any(ln.startswith(f"{LONG} ") and "holders" in ln for ln in lines)
    else:
        assert "holders" in header and "warnings" in header and "errors by object" in header


@pytest.mark.parametrize("width", [80, 200])
def test_repairs_and_run_list(width):
    reps = [{"run_id": RUN, "host": LONG, "profile": "default", "outcome": "REPAIRED", "path": "salvage",
             "verdict_before": "structural_corruption", "loss_rows": 3, "detail": None},
            {"run_id": RUN, "host": "lab07", "profile": "default", "outcome": "REFUSED", "path": None,
             "verdict_before": None, "loss_rows": None, "detail": "REFUSED at 'preflight': " + "x" * 150}]
    lines = printed(lambda c: c.print(repairs_table(reps)), width)
    assert all(len(ln) <= width for ln in lines), lines
    assert any(cells(ln)[:3] == [RUN, LONG, "default"] and "REPAIRED" in ln for ln in lines), lines
    runs = [{"id": RUN, "started": 1796112000.0, "status": "failed", "status_note": None, "exit_code": 2,
             "playbook": "/work/some/long/path/to/fleetops/playbooks/repair.yml"}]
    lines = printed(lambda c: render_list(runs, c), width)
    assert all(len(ln) <= width for ln in lines), lines
    assert any(cells(ln)[:1] == [RUN] for ln in lines), lines
