"""The `fleetops` command as an operator runs it: a real subprocess, exit codes, one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fleetops.engine.results import ResultsStore

from tests.unit.engine.test_results import SECRET, feed
from tests.support.paths import REPO

ROOT = REPO


def fleetops(*args, cwd=None, env_extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("FLEETOPS_DEBUG", None)
    env["COLUMNS"] = "160"
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "fleetops", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def one_error_line(proc):
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("fleetops: error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


def test_help():
    proc = fleetops("--help")
    assert proc.returncode == 0
    for word in ("run", "hosts", "report", "lab", "audit", "inspect", "salvage", "130 interrupted"):
        assert word in proc.stdout
    run_help = fleetops("run", "--help")
    assert run_help.returncode == 0
    for opt in ("--limit", "--tags", "--skip-tags", "--forks", "--check", "--diff", "--json", "--results",
                "--accept-new-host-keys", "--known-hosts", "-e"):
        assert opt in run_help.stdout


@pytest.mark.parametrize("bad", ["novalue", "9x=1", "{not json", "[1, 2]", "@/nonexistent/vars.yml"])
def test_bad_extra_vars(tmp_path, bad):
    (tmp_path / "pb.yml").write_text("- hosts: all\n  tasks: []\n")
    (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    h1:\n")
    proc = fleetops("run", "pb.yml", "-i", "inv.yml", "-e", bad, cwd=tmp_path)
    assert proc.returncode == 4
    line = one_error_line(proc)
    assert "-e" in line or "/nonexistent/vars.yml" in line
    assert proc.stdout == ""
    assert not (tmp_path / "fleetops-runs").exists()


def test_missing_inventory(tmp_path):
    (tmp_path / "pb.yml").write_text("- hosts: all\n  tasks: []\n")
    proc = fleetops("run", "pb.yml", "-i", "nope.yml", cwd=tmp_path)
    assert proc.returncode == 4
    assert "nope.yml" in one_error_line(proc)
    assert not (tmp_path / "fleetops-runs").exists()


def test_usage_error_is_one_line_exit_4(tmp_path):
    proc = fleetops("run", "pb.yml", cwd=tmp_path)          # -i missing
    assert proc.returncode == 4
    assert "--inventory" in one_error_line(proc)
    proc = fleetops("run", "pb.yml", "-i", "x", "--forks", "zero", cwd=tmp_path)
    assert proc.returncode == 4
    assert "--forks" in one_error_line(proc)


def test_report_latest(tmp_path):
    store = ResultsStore(tmp_path / "res", secret_values={SECRET})
    feed(store, "20250101T000000Z-aaaaaa")
    feed(store, "20250102T000000Z-bbbbbb", secret=SECRET)
    store.close()
    proc = fleetops("report", "latest", "--results", tmp_path / "res", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "20250102T000000Z-bbbbbb" in out and "20250101T000000Z-aaaaaa" not in out
    assert "PLAY configure" in out and "command failed: token" in out
    assert SECRET not in out and SECRET not in proc.stderr
    assert "failed" in out.splitlines()[0]

    proc = fleetops("report", "20250101T000000Z-aaa", "--json", "--results", tmp_path / "res", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)                     # exactly one JSON document
    assert doc["run_id"] == "20250101T000000Z-aaaaaa" and doc["status"] == "failed" and doc["exit_code"] == 2
    assert doc["stats"]["web1"] == {"ok": 3, "changed": 1, "unreachable": 0, "failed": 0, "skipped": 0,
                                    "rescued": 0, "ignored": 0}
    assert doc["plays"][0]["tasks"][2]["results"]["db1"]["status"] == "failed"

    proc = fleetops("report", "--list", "--results", tmp_path / "res", cwd=tmp_path)
    assert proc.returncode == 0 and "20250101T000000Z-aaaaaa" in proc.stdout


def test_report_of_killed_run_says_interrupted(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = ("import os, sys\nfrom fleetops.engine.results import ResultsStore\n"
            "s = ResultsStore(sys.argv[1])\ns.run_start('dead-run', 'pb.yml', 'inv.yml', {})\n"
            "s.play_start(0, 'p', ['a'])\n"
            "s.host_result('a', 0, 0, 't', 'command', {'changed': True}, 1.0, 2.0)\nos._exit(0)\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, check=True, timeout=60)
    proc = fleetops("report", "--results", tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "interrupted (no end recorded)" in proc.stdout
    doc = json.loads(fleetops("report", "dead-run", "--json", "--results", tmp_path).stdout)
    assert (doc["status"], doc["recorded_status"], doc["status_note"]) == ("interrupted", "running",
                                                                          "no end recorded")


def test_report_without_runs(tmp_path):
    proc = fleetops("report", cwd=tmp_path)
    assert proc.returncode == 4
    assert "no runs recorded" in one_error_line(proc)
    assert not (tmp_path / "fleetops-runs").exists()
    ResultsStore(tmp_path / "fleetops-runs").close()        # a store with no run in it
    proc = fleetops("report", "latest", cwd=tmp_path)
    assert proc.returncode == 4 and "no runs recorded" in one_error_line(proc)
    feed(ResultsStore(tmp_path / "fleetops-runs"), "r1")
    proc = fleetops("report", "r2", cwd=tmp_path)
    assert proc.returncode == 4 and "no run 'r2'" in one_error_line(proc)


def test_unexpected_error_is_one_line(tmp_path):
    """A corrupt results store is not a traceback: one line naming the problem."""
    res = tmp_path / "res"
    res.mkdir()
    (res / "runs.db").write_bytes(b"this is not a database at all" * 100)
    proc = fleetops("report", "--results", res, cwd=tmp_path)
    assert proc.returncode in (1, 4)
    line = one_error_line(proc)
    assert "not a database" in line


INVENTORY = """\
all:
  vars:
    api_token: tok-ABCDEFG-123
  children:
    web:
      hosts:
        web1: {ansible_host: 10.0.0.1, db_password: hunter2secret, note: "uses hunter2secret"}
        web2:
"""


def test_hosts_masks_secrets(tmp_path):
    (tmp_path / "inv.yml").write_text(INVENTORY)
    proc = fleetops("hosts", "-i", "inv.yml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "web1" in proc.stdout and "web2" in proc.stdout and "10.0.0.1" in proc.stdout
    assert "hunter2secret" not in proc.stdout and "tok-ABCDEFG-123" not in proc.stdout
    proc = fleetops("hosts", "-i", "inv.yml", "--limit", "web1", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert list(doc["hosts"]) == ["web1"]
    web1 = doc["hosts"]["web1"]
    assert web1["ansible_host"] == "10.0.0.1"
    assert web1["db_password"] != "hunter2secret" and "hunter2secret" not in web1["note"]
    assert "hunter2secret" not in proc.stdout
    proc = fleetops("hosts", "-i", "inv.yml", "--limit", "nomatch", cwd=tmp_path)
    assert proc.returncode == 4 and "nomatch" in one_error_line(proc)


def test_run_with_bad_inventory_contacts_nothing(tmp_path):
    (tmp_path / "pb.yml").write_text("- hosts: all\n  tasks: []\n")
    (tmp_path / "dup.yml").write_text("all:\n  hosts:\n    a:\n    a:\n")
    proc = fleetops("run", "pb.yml", "-i", "dup.yml", cwd=tmp_path)
    assert proc.returncode == 4
    assert one_error_line(proc).startswith("fleetops: error: dup.yml:4:")
    (tmp_path / "inv.yml").write_text(INVENTORY)
    proc = fleetops("run", "pb.yml", "-i", "inv.yml", "--limit", "zzz", cwd=tmp_path)
    assert proc.returncode == 4 and "zzz" in one_error_line(proc)
    assert not (tmp_path / "fleetops-runs").exists()


# --- `run` wiring, with stand-ins for the executor's part only -----------------------------
# The real executor, playbook loader and validator are other parts; these stubs emit a
# known event stream so the CLI's own job is tested: store + view wiring, --json purity,
# exit codes, secrets, Ctrl-C once and twice. The inventory is the real one.

FAKE_PARTS = '''
import dataclasses, os, sys, time, types

@dataclasses.dataclass
class RunOptions:
    limit: object; tags: object; skip_tags: object; extra_vars: dict; forks: int; check: bool
    diff: bool; accept_new_host_keys: bool; results_dir: str; known_hosts: object; results_db: object = None
    batch_gate: object = None

def run_playbook(playbook, inventory, options, events, run_id, modules, stop):
    mode = os.environ["FAKE_MODE"]
    hosts = inventory.select(options.limit or "all")
    secret = options.extra_vars.get("db_password", "")
    events.run_start(run_id, "pb.yml", "inv.yml", dataclasses.asdict(options))
    if mode != "closed":
        print("stray executor print")
    else:
        mode = "fail"
        time.sleep(0.2)   # let the reader go away before anything is printed
    events.play_start(0, "demo", hosts)
    events.batch_start(0, 0, hosts)
    events.task_start(0, 0, "say", "command", hosts)
    stats = {}
    for h in hosts:
        events.host_task_start(h, "say")
        failed = mode == "fail" and h == hosts[-1]
        events.host_result(h, 0, 0, "say", "command",
                           {"changed": True, "failed": failed, "msg": "password was " + secret}, 1.0, 2.0)
        stats[h] = {"ok": 0 if failed else 1, "changed": 0 if failed else 1, "failed": int(failed)}
    if mode in ("sigint", "hang"):
        sys.stderr.write("READY\\n"); sys.stderr.flush()
        while mode == "hang" or not stop.is_set():
            time.sleep(0.05)
        events.play_end(0, "interrupted")
        events.run_end("interrupted", stats, 130)
        return types.SimpleNamespace(run_id=run_id, status="interrupted", exit_code=130, stats=stats)
    status, code = ("failed", 2) if mode == "fail" else ("ok", 0)
    events.play_end(0, None)
    events.run_end(status, stats, code)
    return types.SimpleNamespace(run_id=run_id, status=status, exit_code=code, stats=stats)

def _mod(name, **attrs):
    m = types.ModuleType(name); m.__dict__.update(attrs); sys.modules[name] = m

_mod("fleetops.engine.executor", RunOptions=RunOptions, run_playbook=run_playbook)
_mod("fleetops.engine.playbook", load_playbook=lambda path, modules: types.SimpleNamespace(plays=[]),
     walk_tasks=lambda tasks: iter(()))
_mod("fleetops.engine.validate", validate=lambda *a, **k: None, load_vars_file=None)
_mod("fleetops.modules.registry", GENERIC=())
from fleetops.cli import main
raise SystemExit(main(sys.argv[1:]))
'''


def fake_run(tmp_path, mode, *args, popen=False):
    (tmp_path / "inv.yml").write_text(INVENTORY)
    (tmp_path / "pb.yml").write_text("- hosts: all\n  tasks: []\n")
    (tmp_path / "fake_run.py").write_text(FAKE_PARTS)
    env = dict(os.environ, PYTHONPATH=str(ROOT), FAKE_MODE=mode, COLUMNS="160")
    cmd = [sys.executable, str(tmp_path / "fake_run.py"), "run", "pb.yml", "-i", "inv.yml",
           "--results", "res", "-e", "db_password=hunter2-extra", *args]
    if popen:
        return subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_run_records_and_shows(tmp_path):
    proc = fake_run(tmp_path, "fail")
    assert proc.returncode == 2, proc.stderr
    assert "Recap" in proc.stdout and "web1" in proc.stdout and "fleetops report" in proc.stdout
    assert "hunter2-extra" not in proc.stdout + proc.stderr
    run = ResultsStore(tmp_path / "res").get_run("latest")
    assert (run["status"], run["exit_code"]) == ("failed", 2)
    assert {h["host"]: h["failed"] for h in run["hosts"]} == {"web1": 0, "web2": 1}
    assert run["options"]["extra_vars"]["db_password"] != "hunter2-extra"
    assert run["options"]["forks"] == 20
    assert run["options"]["accept_new_host_keys"] is False     # an option name, not a secret
    raw = b"".join(p.read_bytes() for p in (tmp_path / "res").iterdir() if p.name.startswith("runs.db"))
    assert b"hunter2-extra" not in raw and b"hunter2secret" not in raw


def test_run_json_is_one_document(tmp_path):
    proc = fake_run(tmp_path, "ok", "--json", "--limit", "web1", "--tags", "a,b", "--tags", "c")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)            # nothing else on stdout: the stray print went to stderr
    assert "stray executor print" in proc.stderr
    assert doc["status"] == "ok" and doc["exit_code"] == 0
    assert list(doc["plays"][0]["tasks"][0]["results"]) == ["web1"]
    assert sorted(doc["options"]["tags"]) == ["a", "b", "c"]
    assert "hunter2-extra" not in proc.stdout
    assert ResultsStore(tmp_path / "res").get_run(doc["run_id"])["status"] == "ok"


def _wait_for(stream, text):
    for line in stream:
        if text in line:
            return True
    return False


def test_ctrl_c_once_lets_the_run_finish_as_interrupted(tmp_path):
    import signal as _signal
    p = fake_run(tmp_path, "sigint", popen=True)
    try:
        assert _wait_for(p.stderr, "READY")
        p.send_signal(_signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130, err
    assert "Recap" in out
    run = ResultsStore(tmp_path / "res").get_run("latest")
    assert (run["recorded_status"], run["exit_code"]) == ("interrupted", 130)
    assert run["plays"][0]["stopped_reason"] == "interrupted"


def test_ctrl_c_twice_quits_now_and_records_interrupted(tmp_path):
    import signal as _signal
    p = fake_run(tmp_path, "hang", popen=True)
    try:
        assert _wait_for(p.stderr, "READY")
        p.send_signal(_signal.SIGINT)
        assert _wait_for(p.stderr, "Ctrl-C again")
        p.send_signal(_signal.SIGINT)
        p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 130
    run = ResultsStore(tmp_path / "res").get_run("latest")
    assert (run["recorded_status"], run["exit_code"], run["status_note"]) == ("interrupted", 130, None)
    assert len(run["tasks"]) == 2


def test_closed_stdout_does_not_break_the_run(tmp_path):
    """`fleetops run ... | head -1`: the reader leaves; the run still completes and is recorded."""
    p = fake_run(tmp_path, "closed", popen=True)
    p.stdout.close()
    p.communicate(timeout=60)
    assert p.returncode == 2
    run = ResultsStore(tmp_path / "res").get_run("latest")
    assert (run["status"], run["exit_code"], len(run["tasks"])) == ("failed", 2, 2)


def test_version_names_what_it_runs_on():
    proc = fleetops("--version")
    assert proc.returncode == 0
    import fleetops as pkg
    line = proc.stdout.strip()
    assert line.startswith(f"fleetops {pkg.__version__} (Python ") and "paramiko " in line and "SQLite " in line


def test_playbooks_lists_every_bundled_one_with_its_variables(tmp_path):
    proc = fleetops("playbooks", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    books = {b["name"]: b for b in doc["playbooks"]}
    assert set(books) == {"audit", "repair", "rollback", "backup-units"}
    for b in books.values():
        assert b["summary"] and b["variables"], b
        assert "issue" not in b["summary"].lower()
    assert "repair_serial" in {v["name"] for v in books["repair"]["variables"]}
    text = fleetops("playbooks", cwd=tmp_path).stdout
    assert "backup_keep" in text and "rollback" in text


def test_run_by_name_and_unknown_name(tmp_path):
    """A bundled name runs from anywhere; an unknown one is one line naming the bundled ones."""
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1: {ansible_host: 127.0.0.1}\n")
    proc = fleetops("run", "nosuch", "-i", inv, cwd=tmp_path)
    assert proc.returncode == 4
    line = one_error_line(proc)
    assert "nosuch" in line and "audit, backup-units, repair, rollback" in line
    # a bundled playbook found by name gets as far as validation of the user's -e (nothing contacted)
    proc = fleetops("run", "repair", "-i", inv, "-e", "repair_serial=0", cwd=tmp_path)
    assert proc.returncode == 4 and "serial" in one_error_line(proc)
    # a file of the user's wins over a bundled name
    (tmp_path / "repair").write_text("- hosts: all\n  gather_facts: false\n  tasks:\n    - nosuchmodule: {}\n")
    proc = fleetops("run", "repair", "-i", inv, cwd=tmp_path)
    assert proc.returncode == 4 and "nosuchmodule" in one_error_line(proc)


def test_copy_out_a_bundled_playbook_never_overwrites(tmp_path):
    proc = fleetops("playbooks", "--copy", "backup-units", tmp_path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for rel in ("backup-units.yml", "templates/hermes-backup.service.j2", "templates/hermes-backup.timer.j2",
                "files/hermes_backup.py"):
        f = tmp_path / rel
        assert f.is_file() and not f.is_symlink(), rel
    assert (tmp_path / "files/hermes_backup.py").read_bytes() == (ROOT / "fleetops/remote/hermes/backup.py").read_bytes()
    before = (tmp_path / "backup-units.yml").read_bytes()
    proc = fleetops("playbooks", "--copy", "backup-units", tmp_path, cwd=tmp_path)
    assert proc.returncode == 4 and "overwrite" in one_error_line(proc)
    assert (tmp_path / "backup-units.yml").read_bytes() == before


def test_a_fleet_bigger_than_the_hard_open_files_limit_is_refused_before_any_contact(tmp_path):
    """1,200 hosts under `ulimit -Hn 1024`: one line naming the limit and the remedy, exit 4,
    nothing contacted (the addresses would not answer anyway)."""
    inv = tmp_path / "inv.ini"
    inv.write_text("[big]\nh[0001:1200] ansible_host=127.0.0.1 ansible_port=9\n")
    pb = tmp_path / "pb.yml"
    pb.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n    - command: 'true'\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="160")
    env.pop("FLEETOPS_DEBUG", None)
    cmd = f"ulimit -n 1024 && exec {sys.executable} -m fleetops run {pb} -i {inv} --results {tmp_path / 'runs'}"
    proc = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stderr
    line = one_error_line(proc)
    assert "ulimit -n" in line and "1200 hosts need about" in line and "at most 1024" in line
    assert not (tmp_path / "runs").exists()


def test_the_soft_open_files_limit_is_raised_for_a_big_fleet():
    import resource
    from fleetops.runner import ensure_descriptors

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard))
    try:
        got = ensure_descriptors(1000)
        assert got >= 4256 and resource.getrlimit(resource.RLIMIT_NOFILE)[0] == got
        assert ensure_descriptors(10) == got          # enough already: left as it is
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
