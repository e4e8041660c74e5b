"""Issue 3: the audit finds and classifies live holders on lab hosts, over SSH as each host's
user: a real `hermes gateway run`, a respawning desktop-style `hermes serve --isolated`, and a
stray `sqlite3` shell."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.lab_seed import REPO

pytestmark = pytest.mark.lab


def _holders(doc, host) -> list:
    dbs = doc["hosts"][host]["databases"]
    assert len(dbs) == 1 and dbs[0]["verdict"] == "healthy", dbs
    return dbs[0]["holders"]["holders"]


def test_audit_classifies_live_holders_on_lab_hosts(lab, seeder, std_src, tmp_path):
    gw_host, desk_host, sh_host, idle_host = "lab01", "lab02", "lab03", "lab04"
    for name in (gw_host, desk_host, sh_host, idle_host):
        seeder.seed_image(name, std_src)
    gw = seeder.gateway(gw_host)
    seeder.desktop(desk_host, respawns=30, delay=1.0)     # keeps coming back during the audit
    shell = seeder.sqlite_shell(sh_host)
    p = subprocess.run([sys.executable, "-m", "fleetops", "audit", "-i", lab.inventory_path, "--json",
                        "--limit", f"{gw_host}:{desk_host}:{sh_host}:{idle_host}",
                        "--results", str(tmp_path / "runs")],
                       cwd=str(REPO), capture_output=True, text=True, timeout=600)
    doc = json.loads(p.stdout)
    assert p.returncode == 0, p.stderr              # every store healthy: holders are not damage
    gw_holders = _holders(doc, gw_host)
    assert any(h["pid"] == gw and h["kind"] == "gateway" for h in gw_holders), gw_holders
    desk_holders = _holders(doc, desk_host)
    assert [h["kind"] for h in desk_holders] == ["desktop-serve"], desk_holders
    assert "hermes serve --isolated" in desk_holders[0]["cmdline"]
    sh_holders = _holders(doc, sh_host)
    assert [(h["pid"], h["kind"]) for h in sh_holders] == [(shell, "sqlite-shell")], sh_holders
    assert _holders(doc, idle_host) == []
    # as a lab user, root's processes cannot be inspected: never "none", always "unknown"
    for host in (gw_host, desk_host, sh_host, idle_host):
        assert doc["hosts"][host]["databases"][0]["holders"]["status"] == "unknown"
