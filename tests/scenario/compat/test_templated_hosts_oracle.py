"""A templated `hosts:` (trellis' `hosts: "{{ xdebug_tunnel_inventory_host }}"`, a `target`
passed with -e, `groups['web'][0]`), compared with ansible-playbook: the same hosts listed by
`--list-hosts` and the same hosts running the play's task, from -e, play vars, vars_files,
`groups` and a `default` filter; a template that cannot render is refused at its line, as
ansible-core refuses it, never run against some default."""
from __future__ import annotations

import json
import textwrap

import pytest

from tests.support import oracle
from tests.support.cli_run import fleetops

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

INVENTORY = """
all:
  vars: {ansible_connection: local}
  children:
    web: {hosts: {w1: {}, w2: {}}}
    db: {hosts: {d1: {}}}
  hosts: {lone: {}}
"""


def play(hosts: str, extra: str = "", name: str = "templated") -> str:
    return textwrap.dedent(f"""\
        - name: {name}
          hosts: {hosts}
          gather_facts: false
        {textwrap.indent(textwrap.dedent(extra), '  ')}
          tasks:
            - name: show {name}
              debug: {{msg: "{{{{ inventory_hostname }}}}"}}
        """)


# one play per way of templating it, all in one playbook (one ansible-playbook run lists them all)
PLAYS = [
    ("extra-var", '"{{ t1 }}"', ""),
    ("extra-var-union", '"{{ t2 }}"', ""),
    ("default-filter", "\"{{ nosuch | default('db') }}\"", ""),
    ("default-overridden", "\"{{ t3 | default('db') }}\"", ""),
    ("play-vars", '"{{ which }}"', "vars: {which: 'web:!w2'}\n"),
    ("vars-files", '"{{ from_file }}"', "vars_files: [v.yml]\n"),
    ("groups", "\"{{ groups['web'][0] }}\"", ""),
    ("list-of-templates", '["{{ a }}", d1]', "vars: {a: w2}\n"),
    ("part-of-a-pattern", '"web:&{{ one }}"', "vars: {one: w1}\n"),
]
PLAYBOOK = "".join(play(hosts, extra, name) for name, hosts, extra in PLAYS)
FILES = {"v.yml": "from_file: db\n"}
EXTRA = ["-e", "t1=web", "-e", "t2=web:db", "-e", "t3=lone"]


def _write(tmp_path, text: str, files: dict) -> None:
    (tmp_path / "inv.yml").write_text(textwrap.dedent(INVENTORY))
    (tmp_path / "pb.yml").write_text(text)
    for rel, body in files.items():
        (tmp_path / rel).write_text(body)


def _plays(out: str) -> list:
    """Per play of a --list-hosts output: (header line, pattern line, set of hosts)."""
    plays, lines = [], out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("  play #"):
            n = int(lines[i + 2].strip()[len("hosts ("):].split(")")[0])
            plays.append((line, lines[i + 1], {h.strip() for h in lines[i + 3:i + 3 + n]}))
    return plays


def test_each_play_runs_on_the_hosts_ansible_playbook_picks(tmp_path):
    _write(tmp_path, PLAYBOOK, FILES)
    want = oracle.run("ansible-playbook", "-i", "inv.yml", "pb.yml", "--list-hosts", *EXTRA, cwd=str(tmp_path))
    assert want.returncode == 0, want.stderr
    got = fleetops("run", "pb.yml", "-i", "inv.yml", "--list-hosts", *EXTRA, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    # headers and patterns as ansible-core prints them (rendered); the hosts as a set
    assert _plays(got.stdout) == _plays(want.stdout), (got.stdout, want.stdout)
    assert len(_plays(want.stdout)) == len(PLAYS)
    ran = oracle.playbook_messages(tmp_path / "ansible", PLAYBOOK, INVENTORY, FILES, *EXTRA)
    run = fleetops("run", "pb.yml", "-i", "inv.yml", "--results", tmp_path / "runs", "--json", *EXTRA, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    for (name, _, _), listed, done in zip(PLAYS, _plays(want.stdout), doc["plays"]):
        want_msgs = ran[f"show {name}"]
        assert set(want_msgs) == listed[2], name
        assert {h: r["result"]["msg"] for h, r in done["tasks"][0]["results"].items()} == want_msgs, name


@pytest.mark.parametrize("hosts, fragment", [
    ('"{{ target }}"', "undefined variable 'target' in 'hosts'"),
    ('"{{ groups[\'nosuch\'][0] }}"', "nosuch"),
    ('"{{ empty }}"', "must render to a host pattern"),
])
def test_a_template_that_cannot_render_is_refused_at_its_line(tmp_path, hosts, fragment):
    text = play(hosts, "vars: {empty: ''}\n")
    _write(tmp_path, text, {})
    want = oracle.run("ansible-playbook", "-i", "inv.yml", "pb.yml", cwd=str(tmp_path))
    assert want.returncode != 0
    got = fleetops("run", "pb.yml", "-i", "inv.yml", "--results", tmp_path / "runs", cwd=tmp_path)
    assert got.returncode == 4, got.stderr
    line = got.stderr.strip().splitlines()[-1]
    assert "pb.yml:2:" in line and fragment in line, line
