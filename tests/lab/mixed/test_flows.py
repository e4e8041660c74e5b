"""The audit, salvage, repair and backup-unit flows on the mixed lab's foreign hosts (issue 7).

arm01 runs Debian bookworm arm64 under qemu user-mode emulation and old01 Debian bullseye
(Python 3.9, SQLite 3.34): every flow below runs through the real CLI over SSH, its payloads
under those hosts' own python3, and is checked on their disks (the controller reads the chroot
homes, always through private copies, never opening a host's live file). The databases are
small realistic Hermes stores (the emulated host is slow); the damage is byte-level with
ground truth (tests/corpus/damage.py): default profile = a zeroed messages root page (every
message cut off from its b-tree: only the pure-Python page reader brings them back),
profile "work" = garbage over FTS5 index leaves, profile "ok" = healthy with a live WAL.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fleetops.engine.connection.ssh import SSHTransport
from tests.corpus import build, damage
from tests.support.paths import REPO

pytestmark = pytest.mark.lab

HOSTS = ("arm01", "old01")
LIMIT = ":".join(HOSTS)
SMALL = dict(sessions=6, messages_per_session=(10, 30), seed=5)
CASE = "interior_page_zeroed"
FTS_CASE = "fts_pages_overwritten"
BACKUP_SCRIPT = REPO / "fleetops" / "remote" / "hermes" / "backup.py"
REPAIR_PLAYBOOK = REPO / "playbooks" / "repair.yml"


# ---------------------------------------------------------------- helpers

def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def private_copy(src, tmp_path, tag) -> Path:
    """Copy a host's database (with its sidecars) to the controller's tmp dir; return the copy."""
    dst = tmp_path / "copies" / tag / "state.db"
    dst.parent.mkdir(parents=True, exist_ok=True)
    build.copy_image(Path(src), dst)
    return dst


def rowids(db, table) -> set:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in con.execute(f"SELECT rowid FROM {table} NOT INDEXED")}
    finally:
        con.close()


def pragma(db, sql) -> list:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [r[0] for r in con.execute(sql)]
    finally:
        con.close()


def fleetops(tmp_path, *argv, timeout=900):
    """`python -m fleetops ARGV --json --results tmp/runs` -> (process, JSON document or None)."""
    p = subprocess.run([sys.executable, "-m", "fleetops", *map(str, argv), "--json",
                        "--results", str(tmp_path / "runs")],
                       capture_output=True, text=True, cwd=str(REPO), timeout=timeout)
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except ValueError:
        doc = None
    return p, doc


def task_results(doc) -> dict:
    """{task name: {host: entry}} over every play."""
    return {t["name"]: t["results"] for play in doc["plays"] for t in play["tasks"]}


def failures(doc) -> list:
    return [(h, t["name"], (e.get("result") or {}).get("msg")) for play in doc["plays"] for t in play["tasks"]
            for h, e in t["results"].items() if e["status"] in ("failed", "unreachable")]


def ssh(lab, host, cmd):
    t = SSHTransport(lab.ssh_params(host))
    t.connect()
    try:
        r = t.run(cmd)
        return r.rc, r.stdout.decode(), r.stderr.decode()
    finally:
        t.close()


def home_of(lab, host) -> Path:
    return Path(lab.host_home(host)[0])


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """The small realistic store (plain and with a live WAL) and the two damaged copies, with ground truth."""
    try:
        build.venv_python()
    except build.HermesVenvMissing as exc:
        pytest.skip(f"{exc} (scripts/hermes-venv.sh creates it)")
    d = tmp_path_factory.mktemp("flow-images")
    healthy = d / "healthy" / "state.db"
    build.realistic_db(healthy, **SMALL)
    live = d / "live" / "state.db"
    build.realistic_db(live, **SMALL, keep_wal=True)
    assert (d / "live" / "state.db-wal").stat().st_size > 0
    structural = damage.make(CASE, healthy, d / "structural" / "state.db")
    fts = damage.make(FTS_CASE, healthy, d / "fts" / "state.db")
    # the damage is what the tests say it is: every message is cut off from the messages b-tree
    assert structural.extra["was_root"] and structural.unreachable["messages"] == structural.expected_rows["messages"]
    # the same salvage on the controller (x86-64, this Python and SQLite): the hosts must agree with it
    from fleetops.remote.hermes.salvage_rules import RULES
    from fleetops.remote.sqlite import salvage
    ref = salvage.main({"source": structural.path, "output": str(d / "reference.db")}, rules=RULES)
    assert not ref["failed"], ref["msg"]
    return {"healthy": str(healthy), "live": str(live), "structural": structural, "fts": fts,
            "salvage_ref": ref["report"]}


# (not distinct_keys: the --json output masks every key named like *key*)
SALVAGE_FIGURES = ("identified", "saved", "duplicates_dropped", "repaired", "quarantined",
                   "page_scan_only", "loss_rows", "verdict")


@pytest.fixture
def fleet(mixed_lab, images):
    """arm01 and old01 with a bare home (no ~/.hermes, ~/.local, ~/.config, ~/.fleetops*, crontab)."""
    mixed_lab.clean((".hermes", ".fleetops*", ".local", ".config", "salvage"))
    for h in HOSTS:
        ssh(mixed_lab, h, "crontab -r 2>/dev/null; true")
    yield mixed_lab
    for h in HOSTS:
        ssh(mixed_lab, h, "crontab -r 2>/dev/null; true")


def seed_profiles(lab, images):
    """default: structural damage; profiles/work: FTS damage; profiles/ok: healthy with a live WAL."""
    for h in HOSTS:
        lab.seed_state_db(h, images["structural"].path)
        lab.seed_state_db(h, images["fts"].path, hermes_dir=".hermes/profiles/work")
        lab.seed_state_db(h, images["live"], hermes_dir=".hermes/profiles/ok")


# ---------------------------------------------------------------- audit

def test_audit_on_aarch64_and_bullseye(fleet, images, tmp_path):
    """`fleetops audit` (exit 5): each host's own SQLite names the damage exactly as the ground truth
    says, the tooling report is the host's (3.34 on bullseye, with trigram), and nothing is written."""
    seed_profiles(fleet, images)
    before = {h: {p: sha(home_of(fleet, h) / p) for p in (".hermes/state.db", ".hermes/profiles/work/state.db",
                                                           ".hermes/profiles/ok/state.db",
                                                           ".hermes/profiles/ok/state.db-wal")} for h in HOSTS}
    p, doc = fleetops(tmp_path, "audit", "-i", fleet.inventory_path, "--limit", LIMIT)
    assert doc is not None, p.stderr[-3000:]
    assert p.returncode == 5 and doc["exit_code"] == 5 and doc["engine_exit_code"] == 0, p.stderr[-3000:]
    rows = {(r["host"], r["profile"]): r for r in doc["databases"]}
    assert {h for h, _ in rows} == set(HOSTS)
    want = {"default": images["structural"], "work": images["fts"]}
    for h in HOSTS:
        dbs = {x["profile"]: x for x in doc["hosts"][h]["databases"]}
        for profile, d in want.items():
            r = rows[(h, profile)]
            assert r["verdict"] == d.expect_verdict, (h, profile, r["reasons"])
            # the b-trees quick_check names are exactly the damaged ones
            by_object = (dbs[profile].get("integrity") or {}).get("by_object") or {}
            assert set(by_object) == d.expect_errors_in, (h, profile, by_object)
        ok = rows[(h, "ok")]
        assert ok["verdict"] == "healthy", (h, ok["reasons"])
        assert ok["wal_bytes"] and ok["wal_bytes"] > 0
        # the healthy profile's FTS5 tables (unicode61 and trigram) were walked and MATCH-probed by the host
        fts = dbs["ok"]["fts"]
        assert fts and all(f["checked"] and f["ok"] and f["probe"]["rows"] > 0 for f in fts.values()), fts
        # (by table name: the --json output masks every key named like *token*, "tokenizer" included)
        assert set(fts) == {"messages_fts", "messages_fts_trigram"}, (h, fts)
        # read-only: every file the audit looked at is byte for byte what was seeded
        for rel, digest in before[h].items():
            assert sha(home_of(fleet, h) / rel) == digest, (h, rel)
    tool = {h: doc["hosts"][h]["host_tooling"] for h in HOSTS}
    assert tool["old01"]["sqlite_version"].startswith("3.34.") and tool["old01"]["python"].startswith("3.9.")
    for h in HOSTS:
        assert tool[h]["fts5"] and tool[h]["trigram"], (h, tool[h])
        assert tool[h]["python_executable"].startswith("/usr/bin/python3")
    # the python3 the audit ran on arm01 is the emulated host's own
    rc, out, err = ssh(fleet, "arm01",
                       "python3 -c 'import platform, sqlite3; print(platform.machine(), sqlite3.sqlite_version)'")
    assert rc == 0 and out.split() == ["aarch64", tool["arm01"]["sqlite_version"]], err


# ---------------------------------------------------------------- salvage

SALVAGE_PLAYBOOK = """
- hosts: lab
  gather_facts: true
  tasks:
    - name: salvage
      python:
        payload: salvage
        args:
          source: "{{ ansible_user_dir }}/.hermes/state.db"
          output: "{{ ansible_user_dir }}/salvage/state.db"
          report: "{{ ansible_user_dir }}/salvage/report.json"
          fts: rebuild
      register: salvaged
"""


def test_salvage_payload_on_aarch64_and_bullseye(fleet, images, tmp_path):
    """The salvage payload on each host brings back every message of the zeroed b-tree by its
    page scan, writes a verified file with rebuilt FTS5 (trigram included, on SQLite 3.34), and
    leaves the source untouched."""
    d = images["structural"]
    for h in HOSTS:
        fleet.seed_state_db(h, d.path)
        fleet.seed_file(h, "salvage/.keep", data=b"")           # the output's directory, owned by the user
    src_sha = sha(d.path)
    pb = tmp_path / "salvage.yml"
    pb.write_text(SALVAGE_PLAYBOOK)
    p, doc = fleetops(tmp_path, "run", pb, "-i", fleet.inventory_path, "--limit", LIMIT)
    assert doc is not None, p.stderr[-3000:]
    assert p.returncode == 0 and doc["exit_code"] == 0, failures(doc) or p.stderr[-3000:]
    results = task_results(doc)["salvage"]
    for h in HOSTS:
        home = home_of(fleet, h)
        rep = results[h]["result"]["report"]
        ref = images["salvage_ref"]
        # nothing lost; "partial" only because the zeroed page itself is unreadable (nobody can
        # know what else it held), exactly as on the controller
        assert rep["loss_rows"] == 0 and rep["verdict"] == ref["verdict"] == "partial", (h, rep.get("verdict_reasons"))
        msgs = rep["tables"]["messages"]
        assert set(msgs["unreadable_pages"]) == {str(pg) for pg in d.pages}, (h, msgs["unreadable_pages"])
        assert msgs["saved"] == len(d.expected_rows["messages"])
        # the walk could not reach them: the pure-Python page reader found every one, on this host
        assert msgs["page_scan_only"] == len(d.unreachable["messages"]), msgs
        assert {t: {k: v.get(k) for k in SALVAGE_FIGURES} for t, v in rep["tables"].items()} == \
            {t: {k: v.get(k) for k in SALVAGE_FIGURES} for t, v in ref["tables"].items()}, h
        assert sha(home / ".hermes/state.db") == src_sha
        assert not (home / ".hermes/state.db-wal").exists()
        out = home / "salvage/state.db"
        st = os.stat(out)
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == fleet.host_home(h)[1]
        assert json.loads((home / "salvage/report.json").read_text())["tables"]["messages"]["saved"] == msgs["saved"]
        copy = private_copy(out, tmp_path, f"salvage-{h}")
        for table, ids in d.expected_rows.items():
            assert rowids(copy, table) == ids, (h, table)
        assert pragma(copy, "PRAGMA integrity_check") == ["ok"]
        # the FTS5 indexes the host's SQLite built answer here, for a message's own words
        con = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
        try:
            fts = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'")]
            assert "messages_fts" in fts and "messages_fts_trigram" in fts
            rid, content = con.execute("SELECT rowid, content FROM messages WHERE length(content) > 40 "
                                       "ORDER BY rowid LIMIT 1").fetchone()
            word = max(content.split(), key=len).strip(".,;:!?()[]{}\"'`")
            for t in fts:
                hits = {r[0] for r in con.execute(f"SELECT rowid FROM {t} WHERE {t} MATCH ?",
                                                  ('"%s"' % word.replace('"', '""'),))}
                assert rid in hits, (h, t, word)
        finally:
            con.close()


# ---------------------------------------------------------------- repair

@pytest.mark.skipif(not REPAIR_PLAYBOOK.exists(), reason="playbooks/repair.yml does not exist yet")
def test_repair_playbook_on_aarch64_and_bullseye(fleet, images, tmp_path):
    """`fleetops run playbooks/repair.yml` (canary arm01, then old01): each host's structurally
    damaged store is replaced by a salvaged, verified one holding every recoverable row, the
    damaged original is kept byte for byte in quarantine, and `fleetops audit` then says healthy."""
    d = images["structural"]
    for h in HOSTS:
        fleet.seed_state_db(h, d.path)
    p, doc = fleetops(tmp_path, "run", REPAIR_PLAYBOOK, "-i", fleet.inventory_path, "--limit", LIMIT,
                      "-e", "stop_quiet_window=1", "-e", "stop_grace=2")
    assert doc is not None, p.stderr[-3000:]
    assert p.returncode == 0 and doc["exit_code"] == 0, failures(doc) or p.stderr[-3000:]
    for h in HOSTS:
        home = home_of(fleet, h)
        live = private_copy(home / ".hermes/state.db", tmp_path, f"repaired-{h}")
        assert pragma(live, "PRAGMA integrity_check") == ["ok"], h
        for table, ids in d.expected_rows.items():
            assert rowids(live, table) == ids, (h, table)
        st = os.stat(home / ".hermes/state.db")
        assert st.st_uid == fleet.host_home(h)[1] and stat.S_IMODE(st.st_mode) == 0o600
        [original] = (home / ".hermes/fleetops/quarantine").glob("*/copy/state.db")
        assert sha(original) == sha(d.path), h
    p, doc = fleetops(tmp_path, "audit", "-i", fleet.inventory_path, "--limit", LIMIT)
    assert doc is not None and p.returncode == 0, (p.stderr[-2000:], doc and [r["reasons"] for r in doc["databases"]])
    assert sorted((r["host"], r["profile"], r["verdict"]) for r in doc["databases"]) == \
        [(h, "default", "healthy") for h in sorted(HOSTS)]


# ---------------------------------------------------------------- backup units

def test_backup_units_on_aarch64_and_bullseye(fleet, images, tmp_path):
    """backup-units.yml (cron path: no user systemd in a chroot) installs the job and a crontab
    line on each host; the host's python3 takes a verified backup through the backup API (the
    WAL's last conversation included); the crontab line itself runs; absent removes it all
    and keeps the backups."""
    for h in HOSTS:
        fleet.seed_state_db(h, images["live"])
    live_rows = rowids(private_copy(images["live"], tmp_path, "live-src"), "messages")
    pb = REPO / "playbooks" / "backup-units.yml"
    p, doc = fleetops(tmp_path, "run", pb, "-i", fleet.inventory_path, "--limit", LIMIT,
                      "-e", "backup_randomized_delay=2s")
    assert doc is not None, p.stderr[-3000:]
    assert p.returncode == 0 and doc["exit_code"] == 0, failures(doc) or p.stderr[-3000:]
    facts = doc["facts"]
    assert facts["arm01"]["ansible_architecture"] == "aarch64"
    assert facts["old01"]["ansible_distribution_release"] == "bullseye"
    assert facts["old01"]["ansible_python_version"].startswith("3.9.")
    assert facts["old01"]["ansible_sqlite_version"].startswith("3.34.")
    for h in HOSTS:
        assert facts[h]["ansible_python"].startswith("/usr/bin/python3")
        home = home_of(fleet, h)
        ssh_home = f"/home/{fleet.ssh_params(h).user}"
        script = home / ".local/lib/fleetops/hermes_backup.py"
        assert script.read_bytes() == BACKUP_SCRIPT.read_bytes()
        assert stat.S_IMODE(script.stat().st_mode) == 0o700
        assert not (home / ".config").exists()
        rc, tab, err = ssh(fleet, h, "crontab -l")
        assert rc == 0, err
        lines = tab.splitlines()
        i = lines.index("# fleetops: hermes-backup")
        assert lines[i + 1].startswith("17 3 * * * ")
        assert f"{ssh_home}/.local/lib/fleetops/hermes_backup.py" in lines[i + 1]
        dest = home / ".hermes/fleetops/backups"
        [first] = sorted(dest.glob("state-*.db"))
        man = json.loads(first.with_suffix(".json").read_text())
        assert man["integrity"] == "ok"
        copy = private_copy(first, tmp_path, f"backup-{h}")
        assert pragma(copy, "PRAGMA integrity_check") == ["ok"]
        assert rowids(copy, "messages") == live_rows, h            # the WAL-only conversation too
        assert stat.S_IMODE(first.stat().st_mode) == 0o600 and first.stat().st_uid == fleet.host_home(h)[1]
        # what cron will run, run by the user on the host
        rc, out, err = ssh(fleet, h, lines[i + 1].split(" ", 5)[5])
        assert rc == 0 and err == "", err
        assert len(list(dest.glob("state-*.db"))) == 2
        assert all(json.loads(m.read_text())["integrity"] == "ok" for m in dest.glob("state-*.json"))

    p, doc = fleetops(tmp_path, "run", pb, "-i", fleet.inventory_path, "--limit", LIMIT, "-e", "backup_state=absent")
    assert doc is not None and p.returncode == 0, failures(doc) if doc else p.stderr[-3000:]
    for h in HOSTS:
        home = home_of(fleet, h)
        rc, out, err = ssh(fleet, h, "crontab -l")
        assert rc != 0 and "no crontab" in err.lower(), (out, err)
        assert not (home / ".local").exists()
        assert len(list((home / ".hermes/fleetops/backups").glob("state-*.db"))) == 2    # backups stay


# ---------------------------------------------------------------- no trigram tokenizer

def test_audit_degrades_without_trigram(images, tmp_path, monkeypatch):
    """A host SQLite without the trigram tokenizer (< 3.34: older than any lab host) cannot be
    exercised for real, so the payload's own probe is replaced: the audit must still run, check
    the unicode61 FTS table, and say plainly that the trigram one was not checked (no crash)."""
    from fleetops.remote.hermes import audit as hermes_audit
    from fleetops.remote.hermes import audit_host

    home = tmp_path / "hermes"
    build.copy_image(Path(images["healthy"]), home / "state.db")
    real = audit_host.host_tooling

    def no_trigram():
        t = real()
        t["trigram"] = False
        return t

    monkeypatch.setattr(audit_host, "host_tooling", no_trigram)
    res = hermes_audit.main({"hermes_home": str(home), "holders": False, "services": False})
    assert not res["failed"], res["msg"]
    [rec] = res["databases"]
    fts = rec["fts"]
    tri = [f for f in fts.values() if f["tokenizer"] == "trigram"]
    other = [f for f in fts.values() if f["tokenizer"] != "trigram"]
    assert tri and other
    assert all(not f["checked"] and "no trigram tokenizer" in f["reason"] for f in tri)
    assert all(f["checked"] and f["ok"] for f in other)
    assert any(w["code"] == "fts_unchecked" and "no trigram tokenizer" in w["msg"] for w in rec["warnings"])
    assert rec["verdict"] == "healthy", rec["reasons"]
