"""The systemd payload's own reading, without a systemd: `systemctl show` text parsed as
ansible-core parses it, and arguments refused before systemctl is looked for. What it decides
on a real systemd is tests/lab/compat/test_systemd_oracle.py."""
from __future__ import annotations

import pytest

from fleetops.remote.host import systemd

SHOW = """Type=simple
ExecStart={ path=/bin/sleep ; argv[]=/bin/sleep infinity ; ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }
ExecReload={ path=/bin/true ; argv[]=/bin/true ;
 ignore_errors=no }
Description=a = sign in a value
ActiveState=inactive
LoadState=loaded
"""


def test_show_is_parsed_with_multiline_exec_values():
    props = systemd.parse_show(SHOW)
    assert props["ActiveState"] == "inactive"
    assert props["Description"] == "a = sign in a value"
    assert props["ExecStart"].startswith("{ path=/bin/sleep") and props["ExecStart"].endswith("}")
    assert props["ExecReload"] == "{ path=/bin/true ; argv[]=/bin/true ;\n ignore_errors=no }"
    assert set(props) == {"Type", "ExecStart", "ExecReload", "Description", "ActiveState", "LoadState"}


@pytest.mark.parametrize("args, msg", [
    ({"state": "started"}, "name is required with state, enabled or masked"),
    ({"name": "x", "state": "running"}, "state must be one of started, stopped, restarted, reloaded, got 'running'"),
    ({"name": "x", "state": "started", "scope": "machine"}, "scope must be one of system, user, global"),
    ({"name": "web*", "state": "started"}, "a unit name cannot be a glob pattern: web*"),
])
def test_bad_arguments_fail_before_systemctl(args, msg):
    got = systemd.main(args)
    assert got["failed"] and not got["changed"]
    assert got["msg"].startswith(msg)


def test_a_host_without_systemctl_says_so(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    got = systemd.main({"name": "cron", "state": "started"})
    assert got["failed"] and got["msg"] == "no systemctl on this host: it is not managed by systemd"
