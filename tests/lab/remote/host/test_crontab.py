"""The `crontab` payload on a lab host's real user crontab (never root's on the controller)."""
from __future__ import annotations

import pytest

from fleetops.engine.payload import run_payload
from fleetops.engine.connection.ssh import SSHTransport

pytestmark = pytest.mark.lab

JOB = "/usr/bin/python3 /home/x/.local/lib/fleetops/hermes_backup.py --profile-dir=/home/x/.hermes --keep 2"
THEIRS = "MAILTO=\"\"\n# the user's own entry\n5 4 * * 1 /usr/bin/true weekly-thing\n"


@pytest.fixture
def host(lab, crontab_cmd):
    t = SSHTransport(lab.ssh_params(lab.hosts[0]))
    t.connect()
    t.run("crontab -r 2>/dev/null; true")
    yield t
    t.run("crontab -r 2>/dev/null; true")
    t.close()


def crontab_l(t) -> str | None:
    r = t.run("crontab -l")
    if r.rc != 0:
        assert b"no crontab" in r.stderr, r.stderr
        return None
    return r.stdout.decode()


def cron(t, **args):
    args.setdefault("name", "hermes-backup")
    res = run_payload(t, "cron", args)
    assert "failed" in res
    return res


def test_present_is_idempotent_and_leaves_other_lines_alone(host):
    r = host.run("crontab -", stdin=THEIRS.encode())
    assert r.rc == 0, r.stderr
    res = cron(host, job=JOB, minute="17", hour="3", _diff=True)
    assert res["changed"] and not res["failed"], res
    assert crontab_l(host) == THEIRS + "# fleetops: hermes-backup\n17 3 * * * " + JOB + "\n"
    assert "+17 3 * * * " + JOB in res["diff"] and "--- crontab (before)" in res["diff"]
    again = cron(host, job=JOB, minute="17", hour="3", _diff=True)
    assert not again["changed"] and not again.get("diff"), again
    # a new schedule edits the entry in place: still one entry
    moved = cron(host, job=JOB, minute="5", hour="2", _diff=True)
    assert moved["changed"] and "-17 3 * * * " in moved["diff"] and "+5 2 * * * " in moved["diff"]
    text = crontab_l(host)
    assert text.count("# fleetops: hermes-backup") == 1 and text.startswith(THEIRS)
    # absent removes exactly our two lines
    gone = cron(host, state="absent")
    assert gone["changed"] and crontab_l(host) == THEIRS
    assert not cron(host, state="absent")["changed"]


def test_check_mode_changes_nothing(host):
    res = cron(host, job=JOB, minute="17", hour="3", _check=True, _diff=True)
    assert res["changed"] and res["msg"].startswith("would") and "+17 3 * * * " in res["diff"]
    assert crontab_l(host) is None
    cron(host, job=JOB, minute="17", hour="3")
    before = crontab_l(host)
    assert cron(host, job=JOB, hour="4", minute="17", _check=True)["changed"]
    assert cron(host, state="absent", _check=True)["changed"]
    assert crontab_l(host) == before


def test_absent_of_the_only_entry_removes_the_crontab(host):
    cron(host, job=JOB, special_time="daily")
    assert crontab_l(host) == "# fleetops: hermes-backup\n@daily " + JOB + "\n"
    assert cron(host, state="absent")["changed"]
    assert crontab_l(host) is None                    # as before the install: no crontab at all


def test_duplicate_markers_collapse_to_one(host):
    dup = "# fleetops: hermes-backup\n1 1 * * * old\n# fleetops: hermes-backup\n2 2 * * * older\n"
    host.run("crontab -", stdin=dup.encode())
    res = cron(host, job=JOB, minute="17", hour="3")
    assert res["changed"]
    assert crontab_l(host) == "# fleetops: hermes-backup\n17 3 * * * " + JOB + "\n"


@pytest.mark.parametrize("args, text", [
    ({"job": JOB, "minute": "1 2"}, "minute '1 2' is not a cron field"),
    ({"job": "a\nb"}, "job must be one line"),
    ({"job": JOB, "special_time": "daily", "hour": "3"}, "special_time cannot be combined with hour"),
    ({"job": JOB, "special_time": "fortnightly"}, "special_time 'fortnightly' is not one of"),
    ({}, "job is required"),
    ({"job": JOB, "state": "gone"}, "state must be present or absent"),
])
def test_bad_input_is_one_line_and_writes_nothing(host, args, text):
    res = cron(host, **args)
    assert res["failed"] and text in res["msg"] and "\n" not in res["msg"], res
    assert crontab_l(host) is None
