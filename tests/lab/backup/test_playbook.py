"""playbooks/backup-units.yml end to end on lab hosts (no systemd user manager there: the cron path).

The playbook runs through the real CLI (`python -m fleetops run ... --json`), so src/template
resolution, validation, SSH and payloads are the ones an operator gets. Results are checked
on the hosts' disks and in their real crontabs.
"""
from __future__ import annotations

import hashlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fleetops.engine.connection.ssh import SSHTransport
from fleetops.remote.hermes import backup as hb
from tests.support.backup import ROOT, SCRIPT, backups_in, counts, integrity, manifest_of
from tests.corpus import build

pytestmark = pytest.mark.lab

PLAYBOOK = ROOT / "playbooks" / "backup-units.yml"
# the crontab line sleeps up to backup_randomized_delay first; the test runs it, so keep that short
VARS = ["-e", "backup_randomized_delay=2s"]


def fleet_run(lab, tmp_path, *extra) -> dict:
    names = [h["name"] for h in lab.hosts[:2]]
    r = subprocess.run([sys.executable, "-m", "fleetops", "run", str(PLAYBOOK), "-i", lab.inventory_path,
                        "--limit", ":".join(names), "--json", "--results", str(tmp_path / "runs"), *VARS, *extra],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=900)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        raise AssertionError(f"no JSON document (rc {r.returncode}): {r.stdout[-2000:]} {r.stderr[-2000:]}") from None
    doc["_rc"] = r.returncode
    return doc


def outcomes(doc, status) -> list:
    return [(host, t["name"], e["result"].get("msg")) for p in doc["plays"] for t in p["tasks"]
            for host, e in t["results"].items() if e["status"] == status]


def assert_ok(doc):
    assert doc["_rc"] == 0 and doc["exit_code"] == 0, outcomes(doc, "failed") or doc.get("status")


LIVE_DB = (".hermes/state.db", ".hermes/state.db-wal", ".hermes/state.db-shm")


def listing(home) -> dict:
    """Every path under the home: mode, owner, sha256. Left out: ~/.ssh, ~/.fleetops (no run
    writes there: the run lock is a flock on the home directory itself), the job's data
    (~/.hermes/fleetops: backups stay by design) and the live state.db image, which the job's
    WAL checkpoint rewrites (its rows are compared separately)."""
    out = {}
    for root, dirs, files in os.walk(home):
        rel = os.path.relpath(root, home)
        dirs[:] = [d for d in dirs
                   if os.path.normpath(os.path.join(rel, d)) not in (".ssh", ".fleetops", ".hermes/fleetops")]
        for name in dirs + files:
            p = os.path.join(root, name)
            if os.path.relpath(p, home) in LIVE_DB:
                continue
            st = os.lstat(p)
            out[os.path.relpath(p, home)] = (stat.S_IMODE(st.st_mode), st.st_uid,
                                              hashlib.sha256(open(p, "rb").read()).hexdigest()
                                              if stat.S_ISREG(st.st_mode) else None)
    return out


def rows_of(home, tmp_path) -> dict:
    """Row counts of a user's live state.db, read from a private copy: a read-only open as root
    would leave root-owned -wal/-shm files in the user's profile."""
    tmp = tmp_path / "rows" / os.path.basename(home) / "state.db"
    build.copy_image(Path(home, ".hermes", "state.db"), tmp)
    return counts(tmp)


def crontab_of(user) -> str | None:
    r = subprocess.run(["crontab", "-l", "-u", user], capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


@pytest.fixture
def fleet(lab_clean, crontab_cmd, corpus_ok, tmp_path):
    """Two lab hosts, each user with a realistic ~/.hermes/state.db (+WAL) and nothing of ours installed."""
    hosts = lab_clean.hosts[:2]
    src = tmp_path / "src" / "state.db"
    build.realistic_db(src, **build.STANDARD, keep_wal=True)
    for h in hosts:
        pw = pwd.getpwnam(h["user"])
        subprocess.run(["crontab", "-r", "-u", h["user"]], capture_output=True)
        for leftover in (".local", ".config"):       # lab homes are test-only: start from a bare home
            shutil.rmtree(os.path.join(h["home"], leftover), ignore_errors=True)
        hermes = os.path.join(h["home"], ".hermes")
        os.mkdir(hermes, 0o700)
        for s in ("", "-wal"):
            shutil.copyfile(str(src) + s, os.path.join(hermes, "state.db" + s))
            os.chmod(os.path.join(hermes, "state.db" + s), 0o600)
        for p in (hermes, os.path.join(hermes, "state.db"), os.path.join(hermes, "state.db-wal")):
            os.chown(p, pw.pw_uid, pw.pw_gid)
    yield hosts
    for h in hosts:
        subprocess.run(["crontab", "-r", "-u", h["user"]], capture_output=True)


def test_install_run_idempotent_check_absent(lab, fleet, tmp_path):
    before = {h["name"]: listing(h["home"]) for h in fleet}
    rows = {h["name"]: rows_of(h["home"], tmp_path) for h in fleet}
    for h in fleet:
        assert crontab_of(h["user"]) is None

    first = fleet_run(lab, tmp_path)
    assert_ok(first)
    for h in fleet:
        home, user = h["home"], h["user"]
        script = os.path.join(home, ".local/lib/fleetops/hermes_backup.py")
        assert open(script, "rb").read() == SCRIPT.read_bytes()
        assert stat.S_IMODE(os.stat(script).st_mode) == 0o700
        for d in (".local", ".local/lib", ".local/lib/fleetops"):
            assert stat.S_IMODE(os.stat(os.path.join(home, d)).st_mode) == 0o700, d
        assert not os.path.exists(os.path.join(home, ".config"))      # no unit files on the cron path
        tab = crontab_of(user)
        lines = tab.splitlines()
        i = lines.index("# fleetops: hermes-backup")
        assert lines[i + 1].startswith("17 3 * * * ") and script in lines[i + 1]
        assert "--profile-dir=%s/.hermes" % home in lines[i + 1] and "--keep 2" in lines[i + 1]
        # run_now: one verified backup, owned by the user, private
        dest = os.path.join(home, ".hermes/fleetops/backups")
        [db] = backups_in(Path(dest))
        m = manifest_of(db)
        assert m["integrity"] == "ok" and integrity(db) == ["ok"]
        assert os.stat(db).st_uid == pwd.getpwnam(user).pw_uid and stat.S_IMODE(os.stat(db).st_mode) == 0o600
        # what cron will run, run as the user over SSH twice more: retention keeps exactly 2
        t = SSHTransport(lab.ssh_params(h))
        t.connect()
        try:
            for _ in range(2):
                r = t.run(lines[i + 1].split(" ", 5)[5])
                assert r.rc == 0, r.stderr
                assert r.stderr == b""                      # --quiet: cron mails nothing on success
        finally:
            t.close()
        left = backups_in(Path(dest))
        assert len(left) == 2 and db not in left
        assert all(manifest_of(p)["integrity"] == "ok" for p in left)

    # fleetops audit sees the new backups and their age
    r = subprocess.run([sys.executable, "-m", "fleetops", "audit", "-i", lab.inventory_path, "--limit",
                        fleet[0]["name"], "--json", "--results", str(tmp_path / "runs")],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    assert fleet[0]["home"] + "/.hermes/fleetops/backups/state-" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "age_hours" in r.stdout

    second = fleet_run(lab, tmp_path)
    assert_ok(second)
    assert outcomes(second, "changed") == []

    installed = {h["name"]: (listing(h["home"]), crontab_of(h["user"]), sorted(os.listdir(
        os.path.join(h["home"], ".hermes/fleetops/backups")))) for h in fleet}
    check = fleet_run(lab, tmp_path, "--check", "--diff")
    assert_ok(check)
    assert outcomes(check, "changed") == []
    for h in fleet:
        assert (listing(h["home"]), crontab_of(h["user"]), sorted(os.listdir(
            os.path.join(h["home"], ".hermes/fleetops/backups")))) == installed[h["name"]]

    gone = fleet_run(lab, tmp_path, "-e", "backup_state=absent")
    assert_ok(gone)
    for h in fleet:
        assert listing(h["home"]) == before[h["name"]]
        assert rows_of(h["home"], tmp_path) == rows[h["name"]]     # nothing lost
        assert crontab_of(h["user"]) is None
        assert len(backups_in(Path(h["home"], ".hermes/fleetops/backups"))) == 2  # backups stay
    again = fleet_run(lab, tmp_path, "-e", "backup_state=absent")
    assert_ok(again)
    assert outcomes(again, "changed") == []


def test_check_diff_on_a_fresh_host_changes_nothing(lab, fleet, tmp_path):
    before = {h["name"]: listing(h["home"]) for h in fleet}
    doc = fleet_run(lab, tmp_path, "--check", "--diff")
    assert_ok(doc)
    changed = {(host, name) for host, name, _ in outcomes(doc, "changed")}
    for h in fleet:
        assert (h["name"], "install the backup job") in changed
        assert (h["name"], "crontab entry (no systemd user manager)") in changed
        assert listing(h["home"]) == before[h["name"]]
        assert crontab_of(h["user"]) is None
        assert not os.path.exists(os.path.join(h["home"], ".hermes/fleetops"))
    diffs = {t["name"]: e["result"].get("diff", "") for p in doc["plays"] for t in p["tasks"]
             for host, e in t["results"].items() if host == fleet[0]["name"]}
    probe = next(t for p in doc["plays"] for t in p["tasks"] if t["name"] == "detect a systemd user manager")
    res = probe["results"][fleet[0]["name"]]["result"]
    assert res["manager"] is False and res["skipped"] and "no systemd user manager answers" in res["msg"]
    assert '+VERSION = "%s"' % hb.VERSION in diffs["install the backup job"]
    assert "+# fleetops: hermes-backup" in diffs["crontab entry (no systemd user manager)"]


def test_user_crontab_lines_and_directories_survive_absent(lab, fleet, tmp_path):
    """absent takes away only what the playbook made: the user's cron lines and own ~/.local stay."""
    h = fleet[0]
    pw = pwd.getpwnam(h["user"])
    theirs = "# mine\n*/5 * * * * /usr/bin/true\n"
    subprocess.run(["crontab", "-u", h["user"], "-"], input=theirs, text=True, check=True)
    own = os.path.join(h["home"], ".local", "lib")
    os.makedirs(own, 0o755)
    for p in (os.path.dirname(own), own):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    before = listing(h["home"])
    assert_ok(fleet_run(lab, tmp_path, "-e", "run_now=false"))
    assert "# fleetops: hermes-backup" in crontab_of(h["user"]) and crontab_of(h["user"]).startswith(theirs)
    assert not os.path.exists(os.path.join(h["home"], ".hermes/fleetops"))     # run_now=false ran nothing
    assert_ok(fleet_run(lab, tmp_path, "-e", "backup_state=absent"))
    assert crontab_of(h["user"]) == theirs
    assert listing(h["home"]) == before


@pytest.mark.parametrize("extra, text", [
    (["-e", "hermes_profiles=~/.hermes"], "hermes_profiles a non-empty list"),
    (["-e", json.dumps({"backup_on_calendar": "Mon *-*-* 03:00"})], "has no crontab form"),
])
def test_bad_variables_fail_before_anything_is_installed(lab, fleet, tmp_path, extra, text):
    before = {h["name"]: listing(h["home"]) for h in fleet}
    doc = fleet_run(lab, tmp_path, *extra)
    assert doc["_rc"] == 2
    failed = outcomes(doc, "failed")
    assert {host for host, _, _ in failed} == {h["name"] for h in fleet}
    assert all(text in msg for _, _, msg in failed), failed
    for h in fleet:
        assert crontab_of(h["user"]) is None
        assert listing(h["home"]) == before[h["name"]]        # refused before the first change


def test_systemd_units_rendered_by_the_real_play_verify_and_run(lab, fleet, systemd_analyze, tmp_path):
    """The systemd path of the real play (forced with -e, as no user manager runs in the lab): the
    unit files it writes on the host verify with `systemd-analyze --user verify`, and their
    ExecStart, run as the host's user, makes a verified backup. Enabling the timer is skipped here
    ("no systemd user manager answers"): that part is not tested against a real manager."""
    h = fleet[0]
    r = subprocess.run([sys.executable, "-m", "fleetops", "run", str(PLAYBOOK), "-i", lab.inventory_path,
                        "--limit", h["name"], "--json", "--results", str(tmp_path / "runs"), *VARS,
                        "-e", json.dumps({"backup_use_systemd": True, "run_now": False})],
                       capture_output=True, text=True, cwd=str(ROOT), timeout=900)
    doc = json.loads(r.stdout)
    assert r.returncode == 0, outcomes(doc, "failed")
    skipped = {t: m for _, t, m in outcomes(doc, "skipped")}
    assert "no systemd user manager answers" in skipped["enable and start the timer"]
    unit_dir = Path(h["home"], ".config", "systemd", "user")
    service, timer = unit_dir / "hermes-backup.service", unit_dir / "hermes-backup.timer"
    for f in (service, timer):
        st = f.stat()
        assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == pwd.getpwnam(h["user"]).pw_uid
    runtime = tmp_path / "xdg-runtime"
    runtime.mkdir(mode=0o700)
    v = subprocess.run([systemd_analyze, "--user", "verify", str(service), str(timer)], capture_output=True,
                       text=True, env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)})
    assert v.returncode == 0, v.stdout + v.stderr
    assert "OnCalendar=*-*-* 03:17:00\n" in timer.read_text()
    [exec_line] = [ln for ln in service.read_text().splitlines() if ln.startswith("ExecStart=")]
    import shlex
    argv = [a.replace("%%", "%").replace("$$", "$") for a in shlex.split(exec_line[len("ExecStart="):])]
    profile = os.path.join(h["home"], ".hermes")
    assert argv[1:] == [os.path.join(h["home"], ".local", "lib", "fleetops", "hermes_backup.py"),
                        f"--profile-dir={profile}", "--keep", "2"]
    run = subprocess.run(["runuser", "-u", h["user"], "--", *argv], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert hb.main({"action": "status", "profile_dirs": [profile]})["verified"] == 1
    assert not crontab_of(h["user"])          # the timer path leaves no crontab line
