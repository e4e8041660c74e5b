"""The installed package, as an operator uses it: every command from the wheel, outside the checkout.

Each command is run by the installed console script from a directory that is not the checkout, on
the oldest controller Python the README claims, and where it has a local result it is compared with
the same command run from the checkout.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import zipfile
from pathlib import Path

import pytest

from fleetops import bundled
from tests.corpus import damage

from tests.support.install import OLDEST, ROOT, checkout_fleetops

FAST = ["-e", "stop_quiet_window=3", "-e", "stop_grace=3"]


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _doc(proc) -> dict:
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_the_wheel_holds_every_package_file_and_what_the_playbooks_use(wheel):
    """A file of the package, or one that a bundled playbook names, missing from the wheel fails here."""
    names = set(zipfile.ZipFile(wheel).namelist())
    for path in sorted((ROOT / "fleetops").rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
            continue
        rel = path.relative_to(ROOT).as_posix()
        assert rel in names, f"{rel} is in the package but not in the wheel"
    for b in bundled.playbooks():
        text = Path(b.path).read_text()
        for sub in ("templates", "files"):
            for fn in os.listdir(Path(bundled.directory()) / sub):
                if fn in text:
                    assert f"fleetops/playbooks/{sub}/{fn}" in names, (b.name, fn)
        # every `src:` of a copy/template task resolves to a file the wheel carries
        for src in re.findall(r"^\s+src:\s*(\S+)\s*$", text, re.M):
            assert any(n.endswith(f"fleetops/playbooks/{d}/{src}") for d in ("templates", "files") for n in names), \
                (b.name, src)


def test_version_and_playbooks(installed):
    proc = installed("--version")
    assert proc.returncode == 0, proc.stderr
    assert f"(Python {OLDEST[0]}.{OLDEST[1]}." in proc.stdout, proc.stdout
    mine = _doc(installed("playbooks", "--json"))
    theirs = _doc(checkout_fleetops("playbooks", "--json", cwd=installed.cwd))
    assert mine["directory"].startswith(str(installed.venv)), mine["directory"]
    strip = [{k: v for k, v in b.items() if k != "path"} for b in mine["playbooks"]]
    assert strip == [{k: v for k, v in b.items() if k != "path"} for b in theirs["playbooks"]]
    out = installed.cwd / "copied"
    out.mkdir()
    assert installed("playbooks", "--copy", "repair", out).returncode == 0
    assert (out / "repair.yml").read_bytes() == (ROOT / "fleetops/playbooks/repair.yml").read_bytes()


def test_inspect_and_salvage_match_the_checkout(installed, std_src, tmp_path):
    d = damage.make("interior_page_zeroed", std_src, tmp_path / "dmg" / "state.db")
    mine, theirs = installed("inspect", d.path, "--json"), checkout_fleetops("inspect", d.path, "--json", cwd=tmp_path)
    assert mine.returncode == theirs.returncode == 5, (mine.stderr, theirs.stderr)
    a, b = _doc(mine), _doc(theirs)
    for k in ("verdict", "errors_by_object", "conditions", "errors_total"):
        assert a["databases"][0].get(k) == b["databases"][0].get(k), k
    assert a["databases"][0]["verdict"] == d.expect_verdict

    outs = {}
    for who, run in (("installed", installed), ("checkout", None)):
        out = tmp_path / who / "state.db"
        out.parent.mkdir()
        args = ("salvage", d.path, out, "--report", out.with_suffix(".json"), "--json")
        proc = run(*args) if run else checkout_fleetops(*args, cwd=tmp_path)
        assert proc.returncode in (0, 2), proc.stderr[-2000:]
        outs[who] = (proc.returncode, json.loads(out.with_suffix(".json").read_text()), out)
    (rc1, rep1, out1), (rc2, rep2, out2) = outs["installed"], outs["checkout"]
    assert rc1 == rc2 and rep1["verdict"] == rep2["verdict"]
    for t in ("sessions", "messages"):
        q = f"SELECT count(*) FROM {t} NOT INDEXED"
        n1 = sqlite3.connect(out1).execute(q).fetchone()[0]
        assert n1 == sqlite3.connect(out2).execute(q).fetchone()[0] and n1 > 0, t


@pytest.mark.lab
def test_audit_repair_backup_and_report_from_the_wheel(lab, seeder, installed, std_src, tmp_path):
    """On lab hosts: audit (same verdicts as the checkout), `run repair` by name on a damaged host with
    a live gateway, `run backup-units` by name (the job on the host is the installed package's),
    then `report` of each run."""
    damaged, healthy = lab.hosts[0]["name"], lab.hosts[1]["name"]
    d = damage.make("fts_pages_overwritten", std_src, tmp_path / "seed" / "state.db")
    seeder.seed_image(damaged, d.path)
    seeder.seed_image(healthy, std_src)
    seeder.gateway(damaged)
    limit = f"{damaged},{healthy}"
    results = installed.cwd / "runs"

    mine = installed("audit", "-i", lab.inventory_path, "--limit", limit, "--results", results, "--json")
    theirs = checkout_fleetops("audit", "-i", lab.inventory_path, "--limit", limit, "--results",
                               tmp_path / "runs-checkout", "--json", cwd=tmp_path)
    assert mine.returncode == theirs.returncode == 5, mine.stderr[-2000:]
    verdicts = {(r["host"], r["profile"]): r["verdict"] for r in _doc(mine)["databases"]}
    assert verdicts == {(r["host"], r["profile"]): r["verdict"] for r in _doc(theirs)["databases"]}
    assert verdicts == {(damaged, "default"): d.expect_verdict, (healthy, "default"): "healthy"}

    proc = installed("run", "repair", "-i", lab.inventory_path, "-l", damaged, "--results", results, "--json",
                     *FAST, "-e", f"hermes_bin={seeder.hermes}")
    doc = _doc(proc)
    failed = {t["name"]: r.get("result", {}).get("msg") for p in doc["plays"] for t in p["tasks"]
              for r in t["results"].values() if r["status"] == "failed"}
    assert proc.returncode == 0, (failed, proc.stderr[-2000:])
    outcome = {t["name"]: t["results"] for p in doc["plays"] for t in p["tasks"]}["outcome: REPAIRED"]
    assert outcome[damaged]["status"] == "changed", outcome
    assert installed("audit", "-i", lab.inventory_path, "--limit", damaged, "--results", results).returncode == 0

    proc = installed("run", "backup-units", "-i", lab.inventory_path, "-l", healthy, "--results", results, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    home = seeder.host(healthy)["home"]
    job = Path(home, ".local/lib/fleetops/hermes_backup.py")
    packaged = installed.venv.glob("lib/python*/site-packages/fleetops/playbooks/files/hermes_backup.py")
    assert _sha(job) == _sha(next(packaged)) == _sha(ROOT / "fleetops/remote/hermes/backup.py")
    assert list(Path(home, ".hermes/fleetops/backups").glob("state-*.db"))
    installed("run", "backup-units", "-i", lab.inventory_path, "-l", healthy, "--results", results,
              "-e", "backup_state=absent", "-e", "run_now=false")

    listing = _doc(installed("report", "--list", "--results", results, "--json"))["runs"]
    assert len(listing) == 5 and all(r["status"] == "ok" for r in listing), listing
    proc = installed("report", "latest", "--results", results, "--audit")
    assert proc.returncode == 0 and "backup" in proc.stdout.lower(), proc.stderr[-2000:]
