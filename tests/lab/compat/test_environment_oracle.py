"""The `environment` keyword on the lab hosts, run by ansible-core 2.19 and by fleetops: play,
role entry, block and task parts (inner ones win key by key), a template of a mapping, `omit`,
a value with a newline and quotes, through become (real sudo to another user), `$VAR` in a
command's arguments and in `creates`, a payload module's path (stat, lineinfile), fact
gathering (`ansible_env`), an async command and a delegated task: every result the same.
Then what fleetops alone promises: the values never appear on a command line on the host."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.support import lab_parity, oracle

pytestmark = [pytest.mark.lab,
              pytest.mark.skipif(not oracle.available(), reason="ansible-core missing: scripts/setup.sh")]

said = lab_parity.task_and_said

ROLE_TASKS = """
- name: role sees its entry's environment
  shell: echo "$ROLE_V $PLAY_V"
  register: r
- name: "role said"
  debug: {msg: "{{ r.stdout }}"}
"""

PLAYBOOK = """
- name: environment everywhere
  hosts: lab[0:2]
  gather_facts: true
  environment: {PLAY_V: play, OVER: play}
  vars:
    proxy_env: {http_proxy: "http://proxy.example:3128", MULTI: "one\\ntwo 'q' \\"d\\" $x"}
    become_to: "@OTHER@"
  roles:
    - role: envrole
      environment: {ROLE_V: "{{ inventory_hostname }}-role"}
  tasks:
    - name: facts were gathered with the play's environment
      debug: {msg: "{{ ansible_env.PLAY_V | default('none') }}"}
""" + said("task parts win, a template of a mapping", """      shell: 'echo "$PLAY_V $OVER $http_proxy"; printf "%s|" "$MULTI"'
""", "{{ r.stdout }}", """      environment: [{OVER: task}, "{{ proxy_env }}"]
""") + said("command arguments expand it", """      command: echo $PLAY_V ~ ${NOT_SET_ANYWHERE}
""", "{{ r.stdout }}") + said("creates expands it", """      command: echo ran
      args: {creates: "$MARK_DIR/passwd"}
""", "{{ r.stdout }}", """      environment: {MARK_DIR: /etc}
""") + said("omit drops a name", """      shell: echo "${DROPPED-unset} $KEPT"
""", "{{ r.stdout }}", """      environment: {DROPPED: "{{ omit }}", KEPT: 7, FLAG: true}
""") + """
    - name: a block's part, templated per host
      environment: {BLK: "{{ inventory_hostname }}"}
      block:
""" + said("block", """      shell: echo "$BLK $PLAY_V $FLAG"
""", "{{ r.stdout }}").replace("\n    ", "\n        ").replace("\n      ", "\n          ") + said(
    "a payload module's path", """      stat: {path: "$STAT_DIR"}
""", "{{ r.stat.isdir }}", """      environment: {STAT_DIR: /etc}
""") + said("lineinfile's path", """      lineinfile: {path: "$LI_DIR/fo-env.txt", line: "hello", create: true, mode: "0600"}
""", "{{ r.changed }}", """      environment: {LI_DIR: "{{ ansible_env.HOME }}"}
""") + said("through become", """      shell: echo "$(id -un) $PLAY_V $BEC"
""", "{{ r.stdout }}", """      become: true
      become_user: "{{ become_to }}"
      environment: {BEC: inside}
""") + said("an async command", """      shell: echo "$PLAY_V $ASY"
""", "{{ r.stdout }}", """      async: 20
      poll: 1
      environment: {ASY: async}
""") + said("a delegated task", """      shell: echo "$(id -un) $PLAY_V $DEL"
""", "{{ r.stdout }}", """      delegate_to: "@DELEGATE@"
      environment: {DEL: delegated}
""")


@pytest.fixture
def become_rule(lab_clean):
    """Lab host 0..2's login users may become host 3's user (NOPASSWD), as a Hermes host's admin would."""
    if not shutil.which("sudo") or not shutil.which("visudo"):
        pytest.skip("needs sudo and visudo")
    users = [h["user"] for h in lab_clean.hosts[:4]]
    rule = f"/etc/sudoers.d/fleetops-test-env-{lab_clean.prefix}"
    with open(rule, "w") as f:
        f.write("".join(f"{u} ALL=({users[3]}) NOPASSWD: ALL\n" for u in users[:3]))
    os.chmod(rule, 0o440)
    subprocess.run(["visudo", "-cf", rule], check=True, capture_output=True)
    try:
        yield users[3]
    finally:
        os.unlink(rule)


def test_environment_as_ansible_core(lab_clean, become_rule, tmp_path):
    names = [h["name"] for h in lab_clean.hosts[:3]]
    text = PLAYBOOK.replace("@OTHER@", become_rule).replace("@DELEGATE@", names[2])
    # pipelining, as people who care run ansible-core (and as becoming an unprivileged user needs)
    py = {n: {"ansible_python_interpreter": "/usr/bin/python3", "ansible_pipelining": True} for n in names}
    results = {}
    for who in ("ansible", "fleetops"):
        d = lab_parity.write_project(tmp_path / who, {"site.yml": text, "roles/envrole/tasks/main.yml": ROLE_TASKS})
        inv = lab_parity.lab_inventory(lab_clean, os.path.join(d, "inv.yml"), py)
        pb = os.path.join(d, "site.yml")
        lab_clean.clean(("fo-env.txt",))
        results[who] = (lab_parity.ansible_results(pb, inv, lab_clean.known_hosts_path) if who == "ansible"
                        else lab_parity.fleetops_results(pb, inv))
    assert results["fleetops"] == results["ansible"]
    shown = results["ansible"]
    host = names[0]
    assert shown[("task parts win, a template of a mapping said", host)] == [
        ("ok", "play task http://proxy.example:3128\none\ntwo 'q' \"d\" $x|")]
    assert shown[("through become said", host)] == [("ok", f"{become_rule} play inside")]
    assert shown[("omit drops a name said", host)] == [("ok", "unset 7")]
    assert shown[("block said", host)] == [("ok", f"{host} play ")]     # FLAG was the other task's
    assert shown[("facts were gathered with the play's environment", host)] == [("ok", "play")]
    assert shown[("envrole : role said", host)] == [("ok", f"{host}-role play")]


SECRET = "Zq9-token-value-81723"

PEEK = """
- hosts: lab[0]
  gather_facts: false
  environment: {API_TOKEN: "@SECRET@"}
  tasks:
    - name: the program sees it
      shell: 'echo "$API_TOKEN" | wc -c; echo "$API_TOKEN"'
    - name: so does a payload
      stat: {path: "/tmp/$API_TOKEN"}
"""


def test_a_secret_value_reaches_the_program_and_no_output(lab_clean, tmp_path):
    """A secret-named variable of `environment` is scrubbed from everything fleetops prints
    (tests/unit/engine/test_taskenv.py shows it never travels on a command line either)."""
    from tests.support.cli_run import fleetops
    d = lab_parity.write_project(tmp_path, {"pb.yml": PEEK.replace("@SECRET@", SECRET)})
    inv = lab_parity.lab_inventory(lab_clean, os.path.join(d, "inv.yml"), {})
    p = fleetops("run", "pb.yml", "-i", inv, "--known-hosts", lab_clean.known_hosts_path, "--json",
                 "--results", tmp_path / "runs", cwd=d)
    assert p.returncode == 0, p.stderr
    assert SECRET not in p.stdout + p.stderr
    tasks = json.loads(p.stdout)["plays"][0]["tasks"]
    host = lab_clean.hosts[0]["name"]
    assert tasks[0]["results"][host]["result"]["stdout_lines"] == [str(len(SECRET) + 1), "********"]
    assert tasks[1]["results"][host]["result"]["stat"]["exists"] is False
