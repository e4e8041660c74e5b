"""A campaign over the lab: 4 shards (4 `fleetops run --shard K/4 --campaign ID` processes at
once) against a real PostgreSQL store give each host what one controller gives it; the canary,
serial batches and max_fail_percentage hold fleet-wide; a shard SIGKILLed and restarted runs no
host twice; `report --campaign` shows the campaign whole."""
from __future__ import annotations

import json
import signal
import time

import psycopg
import pytest

from fleetops.engine.shards import owner
from tests.support.cli_run import by_task, fleetops, home, start_fleetops, write, write_inventory

pytestmark = pytest.mark.lab
LOG = ".fleetops-campaign.log"
MARK = "    - name: mark\n      shell: echo {{ inventory_hostname }} >> ~/" + LOG + "; wc -l < ~/" + LOG + "\n"


def _setup(lab_clean, tmp_path, body: str):
    n = len(lab_clean.hosts)
    inv = write_inventory(tmp_path / "inv.yml", lab_clean, range(n))
    pb = write(tmp_path / "pb.yml", body)
    return inv, pb, [h["name"] for h in lab_clean.hosts[:n]]


def _shards(pb, inv, pg_url, campaign, tmp_path, count=4, only=None, extra=()):
    procs = {k: start_fleetops("run", pb, "-i", inv, "--shard", f"{k}/{count}", "--campaign", campaign,
                               "--results", pg_url, "--json", *extra, cwd=tmp_path)
             for k in (range(count) if only is None else only)}
    return {k: (p.returncode, out.decode(), err.decode())
            for k, p in procs.items() for out, err in [p.communicate(timeout=600)]}


def _runs_on(lab, names) -> dict:
    """host -> how many times the playbook's mark task ran there (lines in its log)."""
    out = {}
    for i, name in enumerate(names):
        log = home(lab, i) / LOG
        out[name] = len(log.read_text().splitlines()) if log.exists() else 0
    return out


def _campaign_report(pg_url, campaign, tmp_path) -> dict:
    p = fleetops("report", "--campaign", campaign, "--results", pg_url, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _statuses(doc) -> dict:
    return {task: {h: status for h, (status, _r) in hosts.items()} for task, hosts in by_task(doc).items()}


def test_four_shards_give_each_host_what_one_controller_gives_it(lab_clean, pg_url, tmp_path):
    inv, pb, names = _setup(lab_clean, tmp_path, (
        "- hosts: all\n  gather_facts: false\n  serial: [1, 3]\n  tasks:\n" + MARK +
        "    - name: who\n      command: echo {{ inventory_hostname }} {{ ansible_user }}\n"
        "    - name: some fail, ignored\n      command: 'false'\n      when: inventory_hostname[-1] in '135'\n"
        "      ignore_errors: true\n"))
    one = fleetops("run", pb, "-i", inv, "--results", pg_url, "--json", cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    single = json.loads(one.stdout)
    lab_clean.clean((LOG,))
    shards = _shards(pb, inv, pg_url, "c-same", tmp_path)
    assert all(code == 0 for code, _o, _e in shards.values()), {k: e[-1500:] for k, (c, _o, e) in shards.items()}
    parts = {k: sorted(json.loads(out)["stats"]) for k, (_c, out, _e) in shards.items()}
    assert sorted(h for p in parts.values() for h in p) == sorted(names)          # each host in one shard
    assert all(parts[k] == sorted(h for h in names if owner(h, 4) == k) for k in parts)
    assert _runs_on(lab_clean, names) == {h: 1 for h in names}

    whole = _campaign_report(pg_url, "c-same", tmp_path)
    assert _statuses(whole) == _statuses(single)
    assert {h: r["stdout"] for h, (_s, r) in by_task(whole)["who"].items()} == \
        {h: r["stdout"] for h, (_s, r) in by_task(single)["who"].items()}
    assert whole["stats"] == single["stats"]
    assert [sorted(b) for b in whole["plays"][0]["batches"]] == [sorted(b) for b in single["plays"][0]["batches"]]
    assert whole["campaign"]["shards"] == 4 and len(whole["campaign"]["runs"]) == 4
    text = fleetops("report", "--campaign", "c-same", "--results", pg_url, cwd=tmp_path)
    assert text.returncode == 0 and all(h in text.stdout for h in names), text.stderr


def test_a_canary_failure_stops_every_shard_before_any_other_host(lab_clean, pg_url, tmp_path):
    inv, pb, names = _setup(lab_clean, tmp_path, (
        "- hosts: all\n  gather_facts: false\n  serial: [1, '50%']\n  tasks:\n" + MARK +
        "    - fail:\n        msg: canary says no\n      when: inventory_hostname == '" + "CANARY" + "'\n"))
    write(pb, open(pb).read().replace("CANARY", names[0]))
    shards = _shards(pb, inv, pg_url, "c-canary", tmp_path)
    assert _runs_on(lab_clean, names) == {h: int(h == names[0]) for h in names}
    for k, (code, _out, err) in shards.items():
        assert code == 2, (k, err[-1500:])
        assert "campaign c-canary stopped: fleet-wide all hosts of batch 1 failed" in err, (k, err[-1500:])
    whole = _campaign_report(pg_url, "c-canary", tmp_path)
    assert sorted(whole["stats"]) == sorted(names) and whole["status"] == "failed"    # every host, as in one run
    assert [h for h, s in whole["stats"].items() if any(s.values())] == [names[0]]
    assert "all hosts of batch 1 failed" in whole["plays"][0]["stopped_reason"]


def test_fleet_wide_max_fail_percentage_stops_every_shard_at_the_fleets_batch(lab_clean, pg_url, tmp_path):
    """8 hosts, serial [2, 3, 3], max_fail_percentage 50: batch 1 loses 1 of 2 (50%, goes on,
    though the shard holding that host saw all of its part fail), batch 2 loses 2 of 3 (stops)."""
    inv, pb, names = _setup(lab_clean, tmp_path, "")
    assert len(names) >= 8
    bad = [names[0], names[2], names[3]]
    assert owner(names[0], 4) != owner(names[1], 4)     # the failed host's shard sees all of its part fail
    write(pb, "- hosts: all\n  gather_facts: false\n  serial: [2, 3, 3]\n  max_fail_percentage: 50\n  tasks:\n"
          + MARK + f"    - command: 'false'\n      when: inventory_hostname in {bad!r}\n")
    shards = _shards(pb, inv, pg_url, "c-mfp", tmp_path)
    ran = _runs_on(lab_clean, names)
    assert ran == {h: int(h in names[:5]) for h in names}                 # batches 1 and 2 ran, batch 3 never
    for k, (code, _out, err) in shards.items():
        assert code == 2, (k, err[-1500:])
        assert "fleet-wide max_fail_percentage exceeded: 2 of 3 hosts of batch 2 failed" in err, (k, err[-1500:])
    whole = _campaign_report(pg_url, "c-mfp", tmp_path)
    assert sorted(h for h, s in whole["stats"].items() if any(s.values())) == sorted(names[:5])
    assert {h for h, s in whole["stats"].items() if s["failed"]} == set(bad)


def test_a_failure_budget_counts_across_batches(lab_clean, pg_url, tmp_path):
    inv, pb, names = _setup(lab_clean, tmp_path, "")
    bad = [names[1], names[3]]          # one failure in each of two batches: no batch verdict would stop
    write(pb, "- hosts: all\n  gather_facts: false\n  serial: 2\n  tasks:\n"
          + MARK + f"    - command: 'false'\n      when: inventory_hostname in {bad!r}\n")
    shards = _shards(pb, inv, pg_url, "c-budget", tmp_path, extra=("--max-failures", "1"))
    assert _runs_on(lab_clean, names) == {h: int(h in names[:4]) for h in names}
    for k, (code, _out, err) in shards.items():
        assert code == 2 and "failure budget spent: 2 hosts failed across the fleet, --max-failures 1" in err, \
            (k, err[-1500:])


def _marked(pg_url, campaign, batch) -> set:
    with psycopg.connect(pg_url) as conn:
        if conn.execute("SELECT to_regclass('campaign_batches')").fetchone()[0] is None:
            return set()             # no shard has joined yet
        rows = conn.execute("SELECT shard FROM campaign_batches WHERE campaign_id=%s AND batch_index=%s",
                            (campaign, batch)).fetchall()
    return {r[0] for r in rows}


def test_a_shard_killed_and_restarted_runs_no_host_twice(lab_clean, pg_url, tmp_path):
    """serial 1; one host (of another shard) is slow; the victim shard, owning the last host, is
    SIGKILLed while it waits for the slow batch, restarted with the same index (a second copy
    while the first lives is refused), and the campaign finishes with every host run once."""
    inv, pb, names = _setup(lab_clean, tmp_path, "")
    victim = owner(names[-1], 4)
    slow = next(i for i in range(1, len(names) - 1) if owner(names[i], 4) != victim)
    write(pb, "- hosts: all\n  gather_facts: false\n  serial: 1\n  tasks:\n" + MARK +
          f"    - command: sleep {{{{ 6 if inventory_hostname == '{names[slow]}' else 0 }}}}\n")
    others = [k for k in range(4) if k != victim]
    procs = {k: start_fleetops("run", pb, "-i", inv, "--shard", f"{k}/4", "--campaign", "c-kill", "--results",
                               pg_url, "--json", cwd=tmp_path) for k in range(4)}
    deadline = time.monotonic() + 120
    while victim not in _marked(pg_url, "c-kill", slow):
        assert time.monotonic() < deadline and procs[victim].poll() is None, "the victim never reached the slow batch"
        time.sleep(0.1)
    twin = fleetops("run", pb, "-i", inv, "--shard", f"{victim}/4", "--campaign", "c-kill", "--results", pg_url,
                    cwd=tmp_path)
    assert twin.returncode == 4 and "is running on another controller" in twin.stderr, twin.stderr
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].communicate(timeout=60)
    again = _shards(pb, inv, pg_url, "c-kill", tmp_path, only=[victim])
    done = {k: procs[k].communicate(timeout=600) for k in others}
    assert again[victim][0] == 0, again[victim][2][-1500:]
    assert all(procs[k].returncode == 0 for k in others), {k: e.decode()[-1500:] for k, (_o, e) in done.items()}
    assert "already done are skipped" in again[victim][2]
    assert _runs_on(lab_clean, names) == {h: 1 for h in names}
    whole = _campaign_report(pg_url, "c-kill", tmp_path)
    assert sorted(whole["stats"]) == sorted(names) and whole["status"] == "ok"
    assert len(whole["campaign"]["runs"]) == 5
    site = tmp_path / "site"
    p = fleetops("report", "--html", site, "--results", pg_url, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    runs = _site_data(site, "page/runs")["runs"]
    assert [(r["id"], r["hosts"], len(r["members"]), r["status"]) for r in runs] == [("c-kill", len(names), 5, "ok")]
    detail = _site_data(site, "run/c-kill")
    assert sorted(h[0] for h in detail["hosts"]) == sorted(names)
    marks = [t for t in detail["plays"][0]["tasks"] if t["name"] == "mark"]
    assert marks[0]["counts"] == {"changed": len(names)}


def _site_data(site, key: str):
    text = (site / "data" / f"{key}.js").read_text()
    return json.loads(text[text.index(",") + 1:text.rindex(")")])
