"""Lookups (`lookup`, `query`, `q`) and the `with_<lookup>` loops, compared with ansible-playbook
on the same project: a playbook and a role, relative files found through the role's files/ and
templates/ and the playbook directory, wantlist and errors=, each loop's items."""
from __future__ import annotations

import re
import textwrap

import pytest

from tests.support import oracle
from tests.support.playbook_run import run_yaml

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

FILES = {
    "files/pb.txt": "from the playbook dir\n",
    "files/data.csv": "alice\t1\tadmin\nbob\t2\tuser\n",
    "files/comma.csv": "alice,1\nbob,2\n",
    "files/conf.ini": "[global]\nname = top\n[db]\nhost = db1\nport = 5432\n",
    "files/g/one.cfg": "1\n", "files/g/two.cfg": "2\n", "files/g/skip.txt": "x\n",
    "templates/pb.j2": "pb template {{ greeting }}\n",
    "roles/r/files/role.txt": "  from the role  \n",
    "roles/r/templates/t.j2": "role template {{ greeting }} {{ extra | default('none') }}\n",
    "roles/r/tasks/main.yml": textwrap.dedent("""\
        - {name: role_file, debug: {msg: "{{ lookup('file', 'role.txt') }}|{{ lookup('file', 'pb.txt') }}"}}
        - {name: role_file_strip, debug: {msg: "{{ lookup('file', 'role.txt', lstrip=true) }}"}}
        - {name: role_template, debug: {msg: "{{ lookup('template', 't.j2') }}"}}
        - {name: role_template_vars, debug: {msg: "{{ lookup('template', 't.j2', template_vars={'extra': 'x'}) }}"}}
        - name: role_with_first_found
          debug: {msg: "{{ item | basename }}"}
          with_first_found: [missing.txt, pb.txt]
          register: wff
        - {name: role_with_first_found_items, debug: {msg: "{{ wff.results | map(attribute='item') | map('basename') | list }}"}}
        - {name: role_names, debug: {msg: "{{ role_name }} {{ role_path | basename }}"}}
        - {name: role_lists, debug: {msg: "{{ ansible_role_names | sort }} {{ role_names }} {{ ansible_play_role_names }} {{ ansible_dependent_role_names }}"}}
        """),
    "roles/r/meta/main.yml": "dependencies: [d]\n",
    "roles/d/meta/main.yml": "{}\n",
}
PLAYBOOK = """
- hosts: h1
  gather_facts: false
  vars:
    greeting: hello
    d: {b: 2, a: 1}
    users:
      - {name: u1, keys: [k1, k2], opts: {groups: [g1]}}
      - {name: u2, keys: [k3], opts: {groups: []}}
      - {name: u3, opts: {groups: [g2]}}
    nums: [3, 1, 2]
    templated: "{{ greeting }} world"
  tasks:
    - {name: file, debug: {msg: "{{ lookup('file', 'pb.txt') }}"}}
    - {name: file_two, debug: {msg: "{{ lookup('file', 'pb.txt', 'g/one.cfg') }}"}}
    - {name: file_query, debug: {msg: "{{ query('file', 'pb.txt', 'g/one.cfg') }}"}}
    - {name: file_missing_ignore, debug: {msg: "{{ lookup('file', 'nope.txt', errors='ignore') is none }}"}}
    - {name: file_missing_ignore_list, debug: {msg: "{{ lookup('file', 'nope.txt', errors='ignore', wantlist=True) }}"}}
    - {name: env, debug: {msg: "{{ lookup('env', 'FO_LOOKUP_TEST') }}|{{ lookup('env', 'FO_UNSET_XYZ', default='dflt') }}"}}
    - {name: template, debug: {msg: "{{ lookup('template', 'pb.j2') }}"}}
    - {name: pipe, debug: {msg: "{{ lookup('pipe', 'echo one; echo two') }}"}}
    - {name: pipe_cwd, debug: {msg: "{{ lookup('pipe', 'cat files/pb.txt') }}"}}
    - {name: lines, debug: {msg: "{{ query('lines', 'printf \\"a\\\\nb\\\\n\\"') }}"}}
    - {name: vars, debug: {msg: "{{ lookup('vars', 'templated') }}"}}
    - {name: vars_default, debug: {msg: "{{ lookup('vars', 'nope_var', default='dv') }}"}}
    - {name: vars_list, debug: {msg: "{{ query('vars', 'greeting', 'nums') }}"}}
    - {name: varnames, debug: {msg: "{{ query('varnames', '^temp') }}"}}
    - {name: first_found_dict, debug: {msg: "{{ lookup('first_found', {'files': ['a.cfg', 'two.cfg'], 'paths': ['files/g']}) | basename }}"}}
    - {name: first_found_skip, debug: {msg: "{{ query('first_found', {'files': ['zz'], 'skip': True}) }}"}}
    - {name: fileglob, debug: {msg: "{{ query('fileglob', 'g/*.cfg') | map('basename') | list }}"}}
    - {name: fileglob_str, debug: {msg: "{{ lookup('fileglob', 'g/*.cfg') | split(',') | map('basename') | list }}"}}
    - {name: items, debug: {msg: "{{ query('items', [1, [2, 3]], 4) }}"}}
    - {name: indexed, debug: {msg: "{{ query('indexed_items', ['a', 'b']) }}"}}
    - {name: dict, debug: {msg: "{{ query('dict', d) }}"}}
    - {name: list_one, debug: {msg: "{{ lookup('list', 'x') }}"}}
    - {name: list_many, debug: {msg: "{{ lookup('list', 'x', 'y') }}"}}
    - {name: nested, debug: {msg: "{{ query('nested', [1, 2], ['a', 'b']) }}"}}
    - {name: together, debug: {msg: "{{ query('together', [1, 2, 3], ['a', 'b']) }}"}}
    - {name: subelements, debug: {msg: "{{ query('subelements', users, 'keys', {'skip_missing': True}) | map(attribute='1') | list }}"}}
    - {name: subelements_deep, debug: {msg: "{{ query('subelements', users, 'opts.groups') | map(attribute='1') | list }}"}}
    - {name: sequence, debug: {msg: "{{ query('sequence', 'start=1 end=10 stride=3 format=n%02d') }}"}}
    - {name: sequence_short, debug: {msg: "{{ query('sequence', '4-8/2') }}"}}
    - {name: sequence_count, debug: {msg: "{{ query('sequence', 'start=5 count=3') }}"}}
    - {name: random_choice, debug: {msg: "{{ lookup('random_choice', 'a', 'b') in ['a', 'b'] }}"}}
    - {name: csvfile, debug: {msg: "{{ lookup('csvfile', 'bob file=data.csv col=2') }}"}}
    - {name: csvfile_delim, debug: {msg: "{{ lookup('csvfile', 'alice', file='comma.csv', delimiter=',', col=1) }}"}}
    - {name: csvfile_default, debug: {msg: "{{ lookup('csvfile', 'carol file=data.csv default=none') }}"}}
    - {name: ini, debug: {msg: "{{ lookup('ini', 'host', section='db', file='conf.ini') }}"}}
    - {name: ini_global, debug: {msg: "{{ lookup('ini', 'name file=conf.ini') }}"}}
    - {name: ini_default, debug: {msg: "{{ lookup('ini', 'nope', section='db', file='conf.ini', default='d') }}"}}
    - {name: pw_seeded, debug: {msg: "{{ lookup('pass' ~ 'word', '/dev/null', seed='fo', length=12) }}"}}
    - {name: pw_store, debug: {msg: "{{ lookup('pass' ~ 'word', 'pw/one length=8') == lookup('pass' ~ 'word', 'pw/one') }}"}}
    - {name: config, debug: {msg: "{{ lookup('config', 'DEFAULT_BECOME_USER') }}"}}
@LOOPS@  roles: [r]
"""
# (loop key, its value, the item as each result shows it): a loop task and a task printing its items
WITH_LOOPS = (
    ("with_list", "[[1, 2], 3]", "item"), ("with_dict", '"{{ d }}"', "item"),
    ("with_sequence", "start=1 end=3 format=web%d", "item"), ("with_nested", '[[1, 2], "{{ nums[:1] }}"]', "item"),
    ("with_together", "[[1, 2], [a]]", "item"),
    ("with_subelements", '["{{ users }}", keys, {skip_missing: true}]', "item | map(attribute='1')"),
    ("with_indexed_items", "[a, b]", "item"), ("with_lines", "printf 'l1\\nl2\\n'", "item"),
    ("with_fileglob", '["g/*.cfg"]', "item | map('basename')"), ("with_file", "[pb.txt, g/two.cfg]", "item"),
    ("with_items", "[[1, 2], 3]", "item"), ("with_random_choice", "[only]", "item"),
    ("with_env", "[FO_LOOKUP_TEST]", "item"), ("with_varnames", '["^gree"]', "item"),
    ("with_template", "[pb.j2]", "item"), ("with_csvfile", '["alice file=data.csv col=2"]', "item"),
    ("with_ini", '["port section=db file=conf.ini"]', "item"), ("with_pipe", '["echo p1"]', "item"),
    ("with_vars", "[greeting]", "item"),
)
PLAYBOOK = PLAYBOOK.replace("@LOOPS@", "".join(
    f"    - {{name: {key}, debug: {{msg: \"{{{{ item }}}}\"}}, {key}: {value}, register: r_{key}}}\n"
    f"    - {{name: {key}_items, debug: {{msg: \"{{{{ r_{key}.results | map(attribute='{shown.split(' ')[0]}') "
    f"{shown[len(shown.split(' ')[0]):]} | list }}}}\"}}}}\n"
    for key, value, shown in WITH_LOOPS))
INVENTORY = "all:\n  hosts:\n    h1: {ansible_connection: local}\n"


def _names() -> list:
    names = re.findall(r"name: ([a-z_]+)", PLAYBOOK + FILES["roles/r/tasks/main.yml"])
    return [n for n in names if n not in ("u1", "u2", "u3")]


def _as_json(text: str) -> str:
    """Every `msg: "{{ expr }}"` printed as `expr | to_json`, so ansible-playbook's output shows
    lists and mappings as one line the two sides are compared on."""
    return re.sub(r'msg: "\{\{ ((?:(?!\}\}).)*) \}\}"(?=\}|\s*$)', r'msg: "{{ (\1) | to_json }}"', text, flags=re.M)


def test_lookups_and_with_loops_as_ansible_playbook(tmp_path, monkeypatch):
    monkeypatch.setenv("FO_LOOKUP_TEST", "from-env")
    files = {**FILES, "roles/r/tasks/main.yml": _as_json(FILES["roles/r/tasks/main.yml"])}
    want = oracle.playbook_messages(tmp_path / "ansible", _as_json(PLAYBOOK), INVENTORY, files)
    want = {t: by_host["h1"] for t, by_host in want.items()}
    outcome, rec = run_yaml(tmp_path, _as_json(PLAYBOOK), inventory=INVENTORY, files=files)
    assert outcome.exit_code == 0, rec.failures()
    got = {}
    for t in _names():
        found = rec.results(t) or rec.results("r : " + t)
        if found and "msg" in found["h1"] and "results" not in found["h1"]:
            got[t] = found["h1"]["msg"]
    want = {t: v for t, v in want.items() if t in got}
    assert set(got) >= {"file", "role_file", "sequence"} | {f"{key}_items" for key, _, _ in WITH_LOOPS}
    assert set(want) == set(got)
    mismatched = {t: (got[t], want.get(t)) for t in got if got[t] != want.get(t)}
    assert not mismatched
