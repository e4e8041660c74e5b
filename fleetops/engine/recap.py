"""The recap counters: the one place that says what a host's task result counts as.

The executor counts with it (its totals are the run's), and the results store and the live
views read the same classification for the results they show as they arrive.
"""
from __future__ import annotations

COUNTERS = ("ok", "changed", "unreachable", "failed", "skipped", "rescued", "ignored")

_INCREMENTS = {
    "ok": ("ok",), "changed": ("ok", "changed"), "failed": ("failed",),
    "unreachable": ("unreachable",), "skipped": ("skipped",),
    "rescued": ("rescued",), "ignored": ("ok", "ignored"),
}


def result_status(result: dict) -> str:
    """One word for a host's task result, in the order the recap cares about."""
    if result.get("unreachable"):
        return "unreachable"
    if result.get("rescued"):
        return "rescued"
    if result.get("ignored"):
        return "ignored"
    if result.get("failed"):
        return "failed"
    if result.get("skipped"):
        return "skipped"
    if result.get("changed"):
        return "changed"
    return "ok"


def increments(result: dict) -> tuple:
    """Counters a result adds to (ansible-core's convention: changed and ignored also count as
    ok, and an ignored failure that changed something counts as changed too)."""
    status = result_status(result)
    if status == "ignored" and result.get("changed"):
        return ("ok", "changed", "ignored")
    return _INCREMENTS[status]


def zero() -> dict:
    return {k: 0 for k in COUNTERS}


def count(counters: dict, result: dict) -> None:
    """Add one result to a host's counters."""
    for k in increments(result):
        counters[k] = counters.get(k, 0) + 1
