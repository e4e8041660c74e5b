"""The ansible-core module bridge's checks before the run: a bridged module's arguments are
refused at their file:line from the module's own documented options (unknown, missing required,
bad choice or type, a module that needs its action plugin), while the run has contacted no host;
native modules stay the default, and without the bridge an unknown module is refused as before."""
from __future__ import annotations

import pytest

from fleetops import runner
from fleetops.engine.playbook.args import resolve_module
from fleetops.errors import BadInput
from fleetops.extensions import registry
from fleetops.modules import bridge
from tests.support import oracle

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

# a host nothing listens for: a run that contacted it would be unreachable, not refused
INVENTORY = "all:\n  hosts:\n    h1: {ansible_host: 192.0.2.1, ansible_port: 9, fleetops_connect_timeout: 1}\n"


def _load(tmp_path, task: str):
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "pb.yml").write_text("- hosts: h1\n  gather_facts: false\n  tasks:\n    - name: t\n"
                                     f"      {task}\n")
    return runner.load(str(tmp_path / "pb.yml"), str(tmp_path / "inv.yml"), {}, modules=registry().modules)


@pytest.mark.parametrize("task, msg, col", [
    ("replace: {path: /tmp/x, regexp: a, bogus: 1}", "unknown argument 'bogus' for module 'replace'", "5:42"),
    ("ansible.builtin.replace: {regexp: a}", "module 'ansible.builtin.replace' needs argument 'path'", "5:7"),
    ("blockinfile: {path: /tmp/x, state: maybe}",
     "argument 'state' of module 'blockinfile' must be one of absent, present, not 'maybe'", "5:42"),
    ("blockinfile: {path: /tmp/x, backup: perhaps}", "argument 'backup' of module 'blockinfile' must be bool, not 'perhaps'", "5:43"),
    ("getent: {key: root}", "module 'getent' needs argument 'database'", "5:7"),
    ("uri: {url: 'http://example.invalid/'}", "module 'uri' needs ansible-core's action plugin ansible.builtin.uri", "5:7"),
    ("replace: dest=/tmp/x regexp=a nosuch=1", "unknown argument 'nosuch' for module 'replace'", "5:7"),
])
def test_bad_arguments_are_refused_at_their_line_before_contact(tmp_path, task, msg, col):
    with pytest.raises(BadInput) as info:
        _load(tmp_path, task)
    assert msg in info.value.msg
    assert info.value.where == f"{tmp_path / 'pb.yml'}:{col}"


def test_good_arguments_load_and_natives_stay_native(tmp_path):
    loaded = _load(tmp_path, "replace: {dest: /tmp/x, regexp: '{{ r | default(\"a\") }}', backup: 'yes'}")
    task = loaded.playbook.plays[0].tasks[0]
    assert task.module == "replace" and registry().modules["replace"].found.fqcn == "ansible.builtin.replace"
    modules = registry().modules
    assert resolve_module("ansible.builtin.copy", modules) == "copy" and "ansible.builtin.copy" not in modules
    assert modules.get("ansible.legacy.file") is None and modules["file"].__module__ == "fleetops.modules.file"
    assert resolve_module("ansible.builtin.slurp", modules) == "ansible.builtin.slurp"
    assert "comand" not in modules and "community.nosuch.module" not in modules


def test_without_the_bridge_an_unknown_module_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(bridge.OFF_VAR, "0")
    assert bridge.resolver() is None
    modules = type(registry().modules)(dict(registry().modules), bridge.resolver())
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "pb.yml").write_text("- hosts: h1\n  tasks:\n    - replace: {path: /tmp/x, regexp: a}\n")
    with pytest.raises(BadInput) as info:
        runner.load(str(tmp_path / "pb.yml"), str(tmp_path / "inv.yml"), {}, modules=modules)
    assert info.value.msg.startswith("unknown module 'replace'") and info.value.where.endswith("pb.yml:3:7")
