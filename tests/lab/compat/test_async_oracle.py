"""`async:` / `poll:` and `async_status` run on the lab hosts by ansible-core 2.19 and by
fleetops: waiting for a job (poll > 0), fire and forget (poll: 0) then async_status until it has
finished, a job killed at its time limit, each with the keys ansible-core returns; the job files
left in the homes are the user's own, 0600 in a 0700 ~/.ansible_async, and a polled job leaves
none."""
from __future__ import annotations

import os
import stat

import pytest

from tests.support import lab_parity, oracle

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh")]

PLAYBOOK = """
- name: async on the lab
  hosts: lab[0:2]
  gather_facts: false
  tasks:
    - name: wait for it
      shell: sleep 1; echo "waited on $(id -un)"
      async: 20
      poll: 1
      register: waited
    - name: what waiting returned
      debug:
        msg: >-
          {{ waited.stdout }} rc={{ waited.rc }} finished={{ waited.finished }} started={{ waited.started }}
          job={{ 'ansible_job_id' in waited }} file={{ waited.results_file | dirname | basename }}
    - name: fire and forget
      command: sleep 2
      async: 60
      poll: 0
      register: fired
    - name: what firing returned
      debug:
        msg: >-
          finished={{ fired.finished }} started={{ fired.started }} changed={{ fired.changed }}
          file={{ fired.results_file | dirname | basename }} named={{ fired.results_file | basename == fired.ansible_job_id }}
    - name: wait for the job
      async_status:
        jid: "{{ fired.ansible_job_id }}"
      register: job
      until: job.finished
      retries: 30
      delay: 1
    - name: what the job left
      debug:
        msg: "rc={{ job.rc }} finished={{ job.finished }} cmd={{ job.cmd is defined }} same={{ job.ansible_job_id == fired.ansible_job_id }}"
    - name: a failing job
      command: ls /nonexistent-dir
      async: 20
      poll: 1
      register: broken
      ignore_errors: true
    - name: its rc
      debug:
        msg: "rc={{ broken.rc }} finished={{ broken.finished }}"
    - name: too slow
      command: sleep 30
      async: 3
      poll: 5
      register: slow
      ignore_errors: true
    - name: the timeout
      debug:
        msg: "{{ slow.msg }} failed={{ slow.failed }} finished={{ slow.finished | default('-') }}"
"""


def _job_files(homes):
    out = {}
    for host, home in homes.items():
        d = os.path.join(home, ".ansible_async")
        out[host] = sorted(os.listdir(d)) if os.path.isdir(d) else []
    return out


def test_async_as_ansible_core(lab_clean, tmp_path):
    hosts = lab_clean.hosts[:3]
    homes = {h["name"]: h["home"] for h in hosts}
    results = {}
    for who in ("ansible", "fleetops"):
        for home in homes.values():       # each tool starts from homes without job files
            d = os.path.join(home, ".ansible_async")
            if os.path.isdir(d):
                for name in os.listdir(d):
                    os.unlink(os.path.join(d, name))
        d = lab_parity.write_project(tmp_path / who, {"site.yml": PLAYBOOK})
        inv = lab_parity.lab_inventory(lab_clean, os.path.join(d, "inv.yml"))
        pb = os.path.join(d, "site.yml")
        results[who] = (lab_parity.ansible_results(pb, inv, lab_clean.known_hosts_path) if who == "ansible"
                        else lab_parity.fleetops_results(pb, inv))
        left = _job_files(homes)
        # the fire-and-forget job's file stays (async_status in status mode keeps it), no other
        assert all(len(files) == 1 for files in left.values()), (who, left)
    assert results["fleetops"] == results["ansible"]
    want = results["ansible"]
    first = hosts[0]
    assert want[("what waiting returned", first["name"])][0][1].startswith(f"waited on {first['user']} rc=0")
    assert want[("the timeout", first["name"])][0][1] == "Timeout exceeded failed=True finished=True"
    for h in hosts:                        # fleetops' files: the login user's, 0600 in a 0700 directory
        d = os.path.join(h["home"], ".ansible_async")
        st = os.stat(d)
        assert stat.S_IMODE(st.st_mode) == 0o700
        for name in os.listdir(d):
            fst = os.stat(os.path.join(d, name))
            assert stat.S_IMODE(fst.st_mode) == 0o600 and fst.st_uid == st.st_uid
