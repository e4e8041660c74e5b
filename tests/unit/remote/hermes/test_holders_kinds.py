"""Holder kinds for every Hermes version's command lines (HERMES-FACTS: 0.19.0, 0.20.1's renamed
`hermesx*` commands and desktop backends, upstream's entry points); the real processes are
classified in test_fence.py (0.19.0 and 0.20.1 gateways and backends)."""
from __future__ import annotations

import pytest

from fleetops.remote.hermes import holders as hermes_holders
from fleetops.remote.hermes import writers as hermes_writers

V = "/opt/fleetops-test/hermes-0.20.1-venv/bin"


@pytest.mark.parametrize("argv,env,kind", [
    ([f"{V}/python", f"{V}/hermesx", "gateway", "run"], None, "gateway"),
    ([f"{V}/python", f"{V}/hermesx", "serve", "--host", "127.0.0.1", "--port", "0"], None, "desktop-serve"),
    ([f"{V}/python", f"{V}/hermesx", "serve", "--isolated", "--host", "127.0.0.1", "--port", "0"], None,
     "desktop-serve"),
    (["hermes", "serve", "--isolated"], None, "desktop-serve"),
    (["python3", "-m", "hermes_cli.main", "--profile", "work", "gateway", "run"], None, "gateway"),
    (["python3", "/srv/hermes/hermes_cli/main.py", "dashboard", "--port", "9119"], None, "dashboard"),
    (["python3", "/srv/hermes/run_agent.py"], None, "tui"),
    (["python3", "/srv/hermes/run_agent.py", "--query", "hi"], None, "cli"),  # a one-shot
    ([f"{V}/python", f"{V}/hermesx-acp"], None, "acp"),
    (["python3", "-m", "acp_adapter"], None, "acp"),
    ([f"{V}/python", f"{V}/hermesx-agent", "chat"], None, "tui"),
    # a desktop-spawned process is a desktop backend whatever its subcommand says
    (["hermes"], {"HERMES_DESKTOP": "1", "HERMES_DESKTOP_CHILD_PID": "41"}, "desktop-serve"),
    (["python3", "-m", "acp_adapter"], {"HERMES_DESKTOP": "1"}, "desktop-serve"),
    (["hermes", "gateway", "run"], {"HERMES_DESKTOP": "0"}, "gateway"),
    (["hermesx", "sessions", "list"], None, "cli"),
    (["python3", "/home/u/bin/backup.py", "/home/u/.hermes/state.db"], None, "unknown"),
    (["sqlite3", "state.db"], {"HERMES_DESKTOP": "1"}, "sqlite-shell"),
])
def test_kind(argv, env, kind):
    assert hermes_holders.classify(argv, env) == kind


def test_every_hermes_kind_is_ours_to_stop():
    assert set(hermes_holders.HERMES_KINDS) == set(hermes_holders.KINDS) - {"sqlite-shell", "unknown"}
    assert hermes_writers.HERMES_KINDS == hermes_holders.HERMES_KINDS


def test_hermes_command_for_hermesx():
    assert hermes_writers.hermes_command([f"{V}/python", f"{V}/hermesx", "gateway", "run"]) == \
        [f"{V}/python", f"{V}/hermesx"]
