"""Ctrl-C during a real run on lab hosts: running tasks finish, no new task starts, the run is
recorded as interrupted (exit 130) in the results store and in `fleetops report`."""
import json
import os
import pwd
import signal
import subprocess
import sys
import time

import pytest
from tests.support.paths import REPO

pytestmark = pytest.mark.lab
ROOT = str(REPO)


def _sleepers(users) -> int:
    ps = subprocess.run(["ps", "-eo", "user:32=,args="], capture_output=True, text=True).stdout
    return len({ln.split()[0] for ln in ps.splitlines()
                if ln.split() and ln.split()[0] in users and "sleep 3" in ln and "sh -c" not in ln})


def test_sigint_mid_run_is_recorded_interrupted(lab, tmp_path):
    marker = "fleetops-sigint-after"
    book = tmp_path / "book.yml"
    book.write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: slow\n      shell: sleep 3\n"
        f"    - name: after\n      file: {{path: '~/{marker}', state: touch}}\n"
    )
    users = [h["user"] for h in json.load(open(lab.json_path))["hosts"]]
    homes = [pwd.getpwnam(u).pw_dir for u in users]
    for home in homes:
        if os.path.exists(os.path.join(home, marker)):
            os.unlink(os.path.join(home, marker))
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.Popen([sys.executable, "-m", "fleetops", "run", str(book), "-i", lab.inventory_path,
                          "--results", str(tmp_path / "res")], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stdout:             # plain lines (not a TTY): wait until the slow task starts
            if "TASK slow" in line:
                break
        deadline = time.monotonic() + 60  # ... and its `sleep` runs on every host
        while time.monotonic() < deadline and _sleepers(users) < len(users):
            time.sleep(0.05)
        assert _sleepers(users) == len(users)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 130, err
    assert not any(os.path.exists(os.path.join(h, marker)) for h in homes)   # no new task started
    rep = subprocess.run([sys.executable, "-m", "fleetops", "report", "latest", "--json",
                          "--results", str(tmp_path / "res")], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    doc = json.loads(rep.stdout)
    assert doc["status"] == "interrupted" and doc["exit_code"] == 130
    slow = doc["plays"][0]["tasks"][0]["results"]
    assert sorted(slow) == sorted(h["name"] for h in json.load(open(lab.json_path))["hosts"])
    assert all(r["status"] == "changed" for r in slow.values())              # running tasks finished
