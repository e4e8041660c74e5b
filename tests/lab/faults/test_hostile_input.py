"""Hostile or wrong input through the CLI.

Bad input: ONE error line saying what and where, exit 4, and NO host contacted, proved by
pointing the inventory at a TCP listener that counts every connection.
Hostile data: variables full of shell syntax reach the host as data, never as shell.
Host keys: unknown or changed keys are refused with the fingerprint, and nothing runs.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tests.support.cli_run import by_task, fleetops, home, one_error_line, write, write_inventory

PB_OK = """- hosts: all
  gather_facts: true
  tasks:
    - command: touch fault-ran
"""


def _inv(port, extra=""):
    return (f"all:\n  hosts:\n    h1:\n      ansible_host: 127.0.0.1\n      ansible_port: {port}\n"
            f"      x: 1\n{extra}")


# (name, playbook, inventory (None: the plain one; "INI": an INI file), where the line must point, what it says)
BAD = [
    ("inventory YAML syntax", PB_OK, "all:\n  hosts:\n    h1: {ansible_port: [\n", "inv.yml:4:1", "YAML syntax error"),
    ("inventory INI syntax", PB_OK, "INI", "inv.ini:1:1", "invalid section header '[web'"),
    ("playbook YAML syntax", "- hosts: all\n  tasks:\n    - command: echo\n   - bad: indent\n", None,
     "pb.yml:4:4", "YAML syntax error"),
    ("inventory duplicate key", PB_OK, "@dup", "inv.yml:7:7", "duplicate key 'x'"),
    ("playbook duplicate key", "- hosts: all\n  gather_facts: false\n  gather_facts: true\n  tasks: []\n", None,
     "pb.yml:3:3", "duplicate key 'gather_facts'"),
    ("task duplicate key", "- hosts: all\n  tasks:\n    - name: a\n      name: b\n      command: echo\n", None,
     "pb.yml:4:7", "duplicate key 'name'"),
    ("wrong type in playbook", "- hosts: all\n  serial: lots\n  tasks: []\n", None, "pb.yml:2:11", "'serial'"),
    ("wrong type of tasks", "- hosts: all\n  tasks: {command: echo}\n", None, "pb.yml:2:10",
     "'tasks' must be a list"),
    ("wrong argument type", "- hosts: all\n  tasks:\n    - file: {path: [a, b]}\n", None, "pb.yml:3:20",
     "argument 'path' of module 'file' must be"),
    ("wrong type in inventory", PB_OK, "@port", "inv.yml:5:7", "'ansible_port' must be an integer port"),
    ("unknown module", "- hosts: all\n  tasks:\n    - comand: echo hi\n", None, "pb.yml:3:7",
     "unknown module 'comand'"),
    ("unknown task key", "- hosts: all\n  tasks:\n    - command: echo\n      whenn: true\n", None, "pb.yml:4:7",
     "unknown key 'whenn' in task"),
    ("pattern matching nothing", "- hosts: web\n  tasks:\n    - command: echo\n", None, "pb.yml:1:3",
     "hosts pattern 'web' matches no host"),
    ("missing vars file", "- hosts: all\n  vars_files: [nope.yml]\n  tasks:\n    - command: echo\n", None,
     "pb.yml:2:16", "vars file not found"),
    ("undefined variable", "- hosts: all\n  tasks:\n    - command: echo {{ nosuch }}\n", None, "pb.yml:3:7",
     "undefined variable 'nosuch'"),
    ("undefined variable in when", "- hosts: all\n  tasks:\n    - command: echo\n      when: nosuch > 1\n", None,
     "pb.yml:4:7", "undefined variable 'nosuch'"),
    ("sandbox: class walk", "- hosts: all\n  tasks:\n    - debug:\n        msg: \"{{ ''.__class__.__mro__[1]"
     ".__subclasses__() }}\"\n", None, "pb.yml:4:9", "refused by the sandbox"),
    ("sandbox: globals", "- hosts: all\n  tasks:\n    - debug:\n        msg: \"{{ cycler.__init__.__globals__.os"
     ".popen('touch @MARK@').read() }}\"\n", None, "pb.yml:4:9", "refused by the sandbox"),
    ("sandbox: attr filter", "- hosts: all\n  tasks:\n    - debug:\n        msg: \"{{ x | attr('__class__') }}\"\n",
     None, "pb.yml:4:9", "refused by the sandbox"),
    ("sandbox: format string", "- hosts: all\n  tasks:\n    - debug:\n        msg: \"{{ '{0.__class__}'.format(x) }}\"\n",
     None, "pb.yml:4:9", "refused by the sandbox"),
    ("sandbox: in a condition", "- hosts: all\n  tasks:\n    - debug: {msg: hi}\n      when: x.__class__ is defined\n",
     None, "pb.yml:4:7", "refused by the sandbox"),
    ("sandbox: in play vars", "- hosts: all\n  vars:\n    z: \"{{ self._TemplateReference__context }}\"\n"
     "  tasks:\n    - debug: {msg: '{{ z }}'}\n", None, "pb.yml:3:5", "refused by the sandbox"),
    ("sandbox: in the inventory", "- hosts: all\n  tasks:\n    - debug: {msg: '{{ y }}'}\n", "@sandbox", "inv.yml:7:7",
     "refused by the sandbox"),
]


@pytest.mark.parametrize("name,playbook,inventory,where,what", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_exit_4_and_no_host_contacted(work, listener, name, playbook, inventory, where, what):
    rec = listener("record")
    mark = work / "pwned"
    plain = _inv(rec.port)
    if inventory is None:
        inv = write(work / "inv.yml", plain)
    elif inventory == "INI":
        inv = write(work / "inv.ini", f"[web\nh1 ansible_host=127.0.0.1 ansible_port={rec.port}\n")
    elif inventory == "@dup":
        inv = write(work / "inv.yml", plain + "      x: 2\n")
    elif inventory == "@port":
        inv = write(work / "inv.yml", plain.replace(f"ansible_port: {rec.port}", "ansible_port: eighty"))
    elif inventory == "@sandbox":
        inv = write(work / "inv.yml", plain + "      y: \"{{ ''.__class__.__mro__ }}\"\n")
    else:
        inv = write(work / "inv.yml", inventory)
    pb = write(work / "pb.yml", playbook.replace("@MARK@", str(mark)))
    proc = fleetops("run", os.path.basename(pb), "-i", os.path.basename(inv), cwd=work)
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    line = one_error_line(proc)
    assert line.startswith(f"fleetops: error: {where}:") or line.startswith(f"fleetops: error: {where} "), line
    assert what in line, line
    assert proc.stdout == ""
    assert rec.connections == 0                       # no host contacted
    assert not (work / "fleetops-runs").exists()       # no run recorded
    assert not mark.exists()


def test_bad_keys_are_refused_before_any_host_is_contacted(work, listener, tmp_path):
    rec = listener("record")
    key = tmp_path / "id_test"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    pb = write(work / "pb.yml", PB_OK)
    env = {"SSH_AUTH_SOCK": ""}
    # readable by others
    os.chmod(key, 0o644)
    inv = write(work / "inv.yml", _inv(rec.port, f"      ansible_ssh_private_key_file: {key}\n"))
    proc = fleetops("run", pb, "-i", inv, cwd=work, env_extra=env)
    assert proc.returncode == 4
    line = one_error_line(proc)
    assert f"host h1: private key {key} has mode 0644" in line and f"chmod 600 {key}" in line
    # encrypted, and no agent to unlock it
    os.chmod(key, 0o600)
    subprocess.run(["ssh-keygen", "-q", "-p", "-f", str(key), "-P", "", "-N", "fault-passphrase"], check=True)
    proc = fleetops("run", pb, "-i", inv, cwd=work, env_extra=env)
    assert proc.returncode == 4
    assert f"private key {key} is encrypted and no ssh-agent is available" in one_error_line(proc)
    assert "fault-passphrase" not in proc.stderr
    assert rec.connections == 0 and not (work / "fleetops-runs").exists()


def _fingerprint(pub_path) -> str:
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", pub_path], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[1]


@pytest.mark.lab
def test_unknown_and_changed_host_keys_are_refused_and_nothing_runs(fleet, work, tmp_path):
    h0 = fleet.hosts[0]
    real_fp = _fingerprint(h0["host_key"] + ".pub")
    lines = open(fleet.known_hosts_path).read().splitlines()
    mine = f"[127.0.0.1]:{h0['port']} "
    # unknown: lab01's line removed
    kh_unknown = write(work / "kh_unknown", "\n".join(x for x in lines if not x.startswith(mine)) + "\n")
    # changed: lab01's line holds another key
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    ktype, blob = open(str(other) + ".pub").read().split()[:2]
    kh_changed = write(work / "kh_changed", "\n".join(
        (mine + f"{ktype} {blob}") if x.startswith(mine) else x for x in lines) + "\n")
    pb = write(work / "pb.yml", PB_OK)
    for kh, extra, want in (
            (kh_unknown, [], f"host key for [127.0.0.1]:{h0['port']} is not in known_hosts (ssh-ed25519 {real_fp})"),
            (kh_changed, [], f"HOST KEY CHANGED for [127.0.0.1]:{h0['port']}: known_hosts has "
                             f"{_fingerprint(str(other) + '.pub')}, host offers {real_fp}; refusing to connect"),
            (kh_changed, ["--accept-new-host-keys"], "HOST KEY CHANGED")):
        before = open(kh).read()
        inv = write_inventory(work / "inv.yml", fleet, [0, 1], known_hosts=kh)
        proc = fleetops("run", pb, "-i", inv, "--json", "--results", work / "runs", *extra, cwd=work)
        assert proc.returncode == 3, proc.stderr
        tasks = by_task(json.loads(proc.stdout))
        status, res = tasks["Gathering Facts"]["lab01"]
        assert status == "unreachable" and want in res["msg"], res["msg"]
        assert tasks["command"]["lab02"][0] == "changed" and "lab01" not in tasks["command"]
        assert not (home(fleet, 0) / "fault-ran").exists()
        assert open(kh).read() == before                # a changed key is never "fixed" by recording
        (home(fleet, 1) / "fault-ran").unlink()
    # the unknown key is also named on the terminal
    inv = write_inventory(work / "inv.yml", fleet, [0], known_hosts=kh_unknown)
    proc = fleetops("run", pb, "-i", inv, "--results", work / "runs", cwd=work)
    assert proc.returncode == 3 and real_fp in proc.stdout


HOSTILE = [
    "$(touch pwned-1)",
    "`touch pwned-2`",
    "; touch pwned-3",
    "' ; touch pwned-4 ; '",
    '" ; touch pwned-5 ; "',
    "a\ntouch pwned-6\nb",
    "| touch pwned-7",
    "&& touch pwned-8 &&",
    "--help",
    "-rf",
    "$HOME ${IFS} * ? ~ \\ # !",
    "{0} %s %n",
]


@pytest.mark.lab
def test_hostile_variables_reach_the_host_as_data_never_as_shell(fleet, work):
    for i in (0, 1):
        (home(fleet, i) / "fault-data").mkdir()
        shutil.chown(str(home(fleet, i) / "fault-data"), fleet.hosts[i]["user"], fleet.hosts[i]["user"])
    hostile = [{"i": n, "v": v} for n, v in enumerate(HOSTILE)]
    inv = write_inventory(work / "inv.yml", fleet, [0, 1], overrides={0: {"evil": hostile}, 1: {"evil": hostile}})
    # data from a host never becomes a template either
    template_bait = "{{ cycler.__init__.__globals__.os.system('touch pwned-9') }}"
    for i in (0, 1):
        (home(fleet, i) / "fault-bait").write_text(template_bait + "\n")
    pb = write(work / "pb.yml", """
- hosts: fleet
  gather_facts: false
  tasks:
    - name: argv
      command: {argv: [printf, "%s", "{{ item.v }}"], expand_argument_vars: false}
      loop: "{{ evil }}"
      register: argv
    - name: argv, $VARS and ~ expanded as ansible-core does (by Python, never a shell)
      command: {argv: [printf, "%s", "{{ item.v }}"]}
      loop: "{{ evil }}"
      register: expanded
    - name: free form
      command: printf %s {{ item.v }}
      loop: "{{ evil }}"
      ignore_errors: true
    - name: shell quoted
      shell: printf '%s' {{ item.v | quote }}
      loop: "{{ evil }}"
      register: quoted
    - name: copy content
      copy: {content: "{{ item.v }}", dest: "~/fault-data/copy-{{ item.i }}"}
      loop: "{{ evil }}"
    - name: file path ($VARS expanded by Python, as ansible-core's path arguments are)
      file: {path: "~/fault-data/{{ item.v | replace('/', '_') }}", state: touch}
      loop: "{{ evil }}"
      register: paths
      ignore_errors: true
    - name: creates and chdir
      command: {argv: ["true"], chdir: "~/fault-data", creates: "{{ item.v }}"}
      loop: "{{ evil }}"
      ignore_errors: true
    - name: bait
      command: cat fault-bait
      register: bait
    - name: bait used
      copy: {content: "{{ bait.stdout }}", dest: "~/fault-data/bait"}
    - name: checks
      assert:
        that:
          - argv.results | map(attribute='stdout') | list == evil | map(attribute='v') | list
          - quoted.results | map(attribute='stdout') | list == evil | map(attribute='v') | list
          - expanded.results[0].stdout == evil[0].v
          - expanded.results[1].stdout == evil[1].v
          - expanded.results[10].stdout.startswith(ansible_user_dir | default('/home/') )
          - paths.results | selectattr('failed') | map(attribute='item.i') | list == [10]
          - "'No such file or directory' in paths.results[10].msg"
""")
    proc = fleetops("run", pb, "-i", inv, "--json", "--results", work / "runs", cwd=work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    tasks = by_task(json.loads(proc.stdout))
    assert {h: s for h, (s, _) in tasks["checks"].items()} == {"lab01": "ok", "lab02": "ok"}
    for i in (0, 1):
        h = home(fleet, i)
        pwned = sorted(p.name for p in h.rglob("pwned*"))
        assert pwned == [], pwned
        for n, v in enumerate(HOSTILE):
            assert (h / "fault-data" / f"copy-{n}").read_text() == v
            if "$HOME" not in v:             # $HOME/... names a directory that is not there
                assert (h / "fault-data" / v.replace("/", "_")).is_file()
        assert (h / "fault-data" / "bait").read_text() == template_bait
