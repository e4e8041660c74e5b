"""Playbook model: fields, inheritance, and one exact file:line:col per mistake."""
from __future__ import annotations

import os
import textwrap

import pytest

from fleetops.engine.playbook import load_playbook, walk_tasks
from fleetops.engine.yamlsrc import Mapping
from fleetops.errors import BadInput
from fleetops.engine.module import Arg, Module
from tests.support.paths import DATA

DATA = os.path.join(DATA, "playbooks")


class Command(Module):
    name = "command"
    free_form = True
    args = {"cmd": Arg(str), "chdir": Arg(str)}


class Copy(Module):
    name = "copy"
    args = {"content": Arg(str), "dest": Arg(str, required=True), "mode": Arg((str, int)),
            "backup": Arg(bool), "state": Arg(str, choices=("present", "absent"))}


class WaitFor(Module):
    name = "wait_for"
    args = {"port": Arg(int), "timeout": Arg((int, float))}


class Debug(Module):
    name = "debug"
    args = {"msg": Arg(str), "var": Arg(str)}


class SetFact(Module):
    name = "set_fact"
    args = {"cacheable": Arg(bool)}
    any_args = True


MODULES = {"command": Command, "copy": Copy, "wait_for": WaitFor, "debug": Debug, "set_fact": SetFact}


def write(tmp_path, text: str) -> str:
    path = tmp_path / "play.yml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return str(path)


def load(tmp_path, text: str):
    return load_playbook(write(tmp_path, text), MODULES)


def bad(tmp_path, text: str) -> tuple[str, str]:
    """(message, 'line:col') of the BadInput a playbook text raises."""
    path = write(tmp_path, text)
    with pytest.raises(BadInput) as info:
        load_playbook(path, MODULES)
    exc = info.value
    assert "\n" not in str(exc)
    assert exc.where.startswith(path + ":"), exc.where
    return exc.msg, exc.where[len(path) + 1:]


def one_task(tmp_path, task_text: str):
    body = textwrap.indent(textwrap.dedent(task_text).strip("\n"), "    ")
    book = load(tmp_path, "- hosts: all\n  tasks:\n" + body + "\n")
    return book.plays[0].tasks[0]


# -- the example playbook

def test_site_playbook_model():
    book = load_playbook(os.path.join(DATA, "site.yml"), MODULES)
    play = book.plays[0]
    assert play.name == "Audit Hermes stores"
    assert play.hosts == "hermes:!retired"
    assert play.serial == [1, "10%", "50%"]
    assert play.max_fail_percentage == 20.0
    assert play.gather_facts is True and play.any_errors_fatal is False
    assert play.vars_files == [os.path.join(os.path.abspath(DATA), "vars/common.yml")]
    assert isinstance(play.vars, Mapping) and play.vars["db_path"] == "{{ hermes_home }}/state.db"
    show, block, loop = play.tasks
    assert show.module == "command" and dict(show.args) == {"cmd": "ls -l {{ db_path }}", "chdir": "/tmp"}
    assert show.register == "listing" and show.changed_when == [False]
    assert show.where.endswith("site.yml:13:7") and show.tags == ["audit"]
    assert block.is_block and block.module is None and block.become is True
    copy, retry = block.block
    assert copy.tags == ["audit", "repair", "copy"] and copy.become is True
    assert copy.vars == {"snapshot_dir": "{{ backup_root }}/snap"}
    assert copy.notify == ["restart hermes"]
    assert retry.retries == 2 and retry.delay == 1 and retry.until == ["result.rc == 0"]
    assert retry.when == ["optional_flag is defined and optional_flag"]
    assert block.rescue[0].args == {"msg": "failed: {{ ansible_failed_result.msg | default('?') }}"}
    assert block.always[0].args == {"msg": "done {{ inventory_hostname }}"}   # k=v form
    assert loop.loop == "{{ packages }}" and loop.loop_var == "pkg"
    assert loop.delegate_to == "localhost" and loop.run_once is True
    handler = play.handlers[0]
    assert handler.is_handler and handler.name == "restart hermes"
    assert len(list(walk_tasks(play.tasks))) == 7


# -- tasks

def test_free_form_and_args_merge(tmp_path):
    t = one_task(tmp_path, """
        - command: echo {{ x }}
          args:
            chdir: /srv
    """)
    assert dict(t.args) == {"cmd": "echo {{ x }}", "chdir": "/srv"}
    assert t.args.key_where("chdir").endswith(":5:9")
    assert t.args.key_where("cmd").endswith(":3:7")


def test_module_given_twice_through_args(tmp_path):
    msg, at = bad(tmp_path, """
        - hosts: all
          tasks:
            - copy: {dest: /a}
              args:
                dest: /b
    """)
    assert "given twice" in msg and at == "5:9"


def test_kv_string_args_are_parsed_and_coerced(tmp_path):
    t = one_task(tmp_path, "- wait_for: port=22 timeout=1.5\n")
    assert t.args == {"port": 22, "timeout": 1.5}
    t = one_task(tmp_path, "- debug: msg=\"hello {{ who | default('you') }}\"\n")
    assert t.args == {"msg": "hello {{ who | default('you') }}"}


def test_fqcn_module_name(tmp_path):
    t = one_task(tmp_path, "- ansible.builtin.command: id\n")
    assert t.module == "command" and t.args == {"cmd": "id"}


def test_task_defaults(tmp_path):
    t = one_task(tmp_path, "- debug: {msg: hi}\n")
    assert (t.when, t.loop, t.loop_var, t.register, t.retries, t.until, t.delay) == \
        ([], None, "item", None, None, None, 5)
    assert (t.failed_when, t.changed_when, t.ignore_errors, t.notify, t.tags) == (None, None, False, [], [])
    assert (t.run_once, t.delegate_to, t.check_mode, t.vars, t.become, t.become_user) == \
        (False, None, None, {}, False, None)
    assert (t.block, t.rescue, t.always, t.is_handler) == (None, None, None, False)


def test_when_string_becomes_list_and_with_items(tmp_path):
    t = one_task(tmp_path, """
        - debug: {msg: "{{ item }}"}
          when: x > 1
          with_items: [1, 2]
          until: r.rc == 0
          failed_when: [a, b]
    """)
    assert t.when == ["x > 1"] and t.loop == [1, 2] and t.failed_when == ["a", "b"]
    assert t.until == ["r.rc == 0"] and t.retries == 3   # Ansible's default when until is set


def test_tag_inheritance_play_blocks_task(tmp_path):
    book = load(tmp_path, """
        - hosts: all
          tags: [p]
          tasks:
            - block:
                - block:
                    - debug: {msg: a}
                      tags: t1, t2
                  tags: inner
              tags: [outer, p]
              when: outer_cond
              vars: {v: 1}
              become_user: hermes
    """)
    outer = book.plays[0].tasks[0]
    leaf = outer.block[0].block[0]
    assert outer.tags == ["p", "outer"]
    assert leaf.tags == ["p", "outer", "inner", "t1", "t2"]
    assert leaf.when == ["outer_cond"] and leaf.vars == {"v": 1} and leaf.become_user == "hermes"


@pytest.mark.parametrize("serial, expected", [
    ("2", [2]), ("'30%'", ["30%"]), ("[1, '10%', 50%]", [1, "10%", "50%"]), ("~", []), ("'100%'", ["100%"]),
    ("'3'", [3]),
])
def test_serial_parsing(tmp_path, serial, expected):
    book = load(tmp_path, f"- hosts: all\n  serial: {serial}\n  tasks: []\n")
    assert book.plays[0].serial == expected


def test_serial_absent_is_all_at_once(tmp_path):
    assert load(tmp_path, "- hosts: all\n").plays[0].serial == []


@pytest.mark.parametrize("serial, at", [
    ("[1, 0]", "2:15"), ("0", "2:11"), ("'0%'", "2:11"), ("'101%'", "2:11"), ("[true]", "2:12"),
    ("[-1]", "2:12"), ("'x'", "2:11"), ("[]", "2:11"),
])
def test_serial_errors(tmp_path, serial, at):
    msg, where = bad(tmp_path, f"- hosts: all\n  serial: {serial}\n")
    assert "serial" in msg and where == at


def test_hosts_list_and_play_defaults(tmp_path):
    play = load(tmp_path, "- hosts: [a, b]\n  gather_facts: no\n").plays[0]
    assert play.hosts == "a:b" and play.name == "a,b" and play.gather_facts is False   # ansible-core names it a,b
    assert play.tasks == [] and play.handlers == [] and play.max_fail_percentage is None


# -- errors, each with its exact position

ERRORS = [
    # (playbook text, message fragment, line:col)
    ("- hosts: all\n  task: []\n", "unknown key 'task' in play (did you mean: tasks", "2:3"),
    ("- hosts: all\n  tasks:\n    - name: x\n      command: ls\n      whn: x\n",
     "unknown key 'whn' in task (did you mean: when?)", "5:7"),
    ("- hosts: all\n  tasks:\n    - comand: ls\n", "unknown module 'comand' (did you mean: command?)", "3:7"),
    ("- hosts: all\n  tasks:\n    - name: x\n      command: ls\n      debug: {msg: x}\n",
     "two module keys", "5:7"),
    ("- hosts: all\n  tasks:\n    - name: only a name\n", "task has no module", "3:7"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      environment: A=1\n", "'environment' must be a mapping", "4:20"),
    ("- hosts: all\n  environment: [{A: 1}, 3]\n  tasks: []\n", "'environment' must be a mapping", "2:25"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      retries: x\n", "'retries' must be an integer", "4:16"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      when: {a: 1}\n", "'when' must be an expression", "4:13"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      when: [ok, [x]]\n", "'when' must be an expression", "4:18"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      tags: 3\n", "'tags' must be a string or a list", "4:13"),
    ("- hosts: all\n  tasks:\n    - copy: {dest: /x, colour: red}\n", "unknown argument 'colour' for module 'copy'", "3:24"),
    ("- hosts: all\n  tasks:\n    - copy:\n        content: x\n", "module 'copy' needs argument 'dest'", "3:7"),
    ("- hosts: all\n  tasks:\n    - wait_for:\n        port: 'x'\n",
     "argument 'port' of module 'wait_for' must be int, not a string", "4:15"),
    ("- hosts: all\n  tasks:\n    - wait_for: {port: true}\n", "must be int, not a bool", "3:24"),
    ("- hosts: all\n  tasks:\n    - copy: {dest: /x, state: gone}\n", "must be one of present, absent", "3:31"),
    ("- hosts: all\n  tasks:\n    - copy: {dest: /x, backup: 'yes'}\n", "must be bool", "3:32"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      register: 'my var'\n", "'register' must be a valid", "4:17"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      loop: 3\n", "'loop' must be a list", "4:13"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      loop: [1]\n      with_items: [2]\n", "either 'loop' or 'with_items'", "5:7"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      loop_control: {loop_vr: x}\n", "unknown key 'loop_vr'", "4:22"),
    ("- hosts: all\n  tasks:\n    - block:\n        - command: ls\n      loop: [1]\n", "'loop' is not allowed on a block", "5:7"),
    ("- hosts: all\n  tasks:\n    - block: []\n", "'block' is empty", "3:7"),
    ("- hosts: all\n  tasks:\n    - block:\n        - command: ls\n      command: ls\n", "cannot also run a module", "5:7"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      rescue: []\n", "'rescue' needs a 'block'", "4:7"),
    ("- hosts: all\n  tasks:\n    - block:\n        - bogus: 1\n", "unknown module 'bogus'", "4:11"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      vars: [a]\n", "'vars' must be a mapping", "4:13"),
    ("- hosts: all\n  vars:\n    ok: 1\n    bad-name: 2\n", "invalid variable name 'bad-name'", "4:5"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      become: 'yes'\n", "'become' must be true or false", "4:15"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      listen: x\n", "'listen' is only for handlers", "4:7"),
    ("- hosts: all\n  handlers:\n    - command: ls\n", "a handler needs a 'name'", "3:7"),
    ("- hosts: all\n  tasks:\n    - command: [ls]\n", "must be a mapping or a command string", "3:16"),
    ("- hosts: all\n  tasks:\n    - wait_for: port 22\n", "must be key=value", "3:17"),
    ("- hosts: all\n  tasks:\n    - include_tasks: x.yml\n", "task file not found: x.yml", "3:22"),
    ("- hosts: all\n  tasks:\n    - import_tasks: '{{ os }}.yml'\n", "a templated import_tasks file ('{{ os }}.yml') can use play variables only", "3:21"),
    ("- hosts: all\n  tasks:\n    - copy: {src: a, dest: b}\n      async: 5\n", "async is supported on command and shell", "4:7"),
    ("- hosts: all\n  tasks:\n    - command: 'true'\n      poll: 0\n", "'poll' needs 'async'", "4:7"),
    ("- hosts: all\n  tasks:\n    - command: 'true'\n      async: soon\n", "'async' must be an integer", "4:14"),
    ("- hosts: all\n  tasks:\n    - import_tasks: x.yml\n      loop: [1]\n", "a loop over an import_tasks", "4:7"),
    ("- hosts: all\n  handlers:\n    - name: h\n      include_role: {name: r}\n",
     "using 'include_role' as a handler is not supported", "3:7"),
    ("- hosts: all\n  tasks:\n    - include: x.yml\n", "'include' was removed", "3:7"),
    ("- hosts: all\n  tasks:\n    - apache2_module: {name: ssl}\n", "unknown module 'apache2_module'", "3:7"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      remote_usr: x\n", "unknown key 'remote_usr' in task (did you mean: remote_user", "4:7"),
    ("- hosts: all\n  strategy: host_pinned\n  tasks: []\n", "'strategy' must be one of linear, free", "2:13"),
    ("- hosts: all\n  tasks:\n    - action: nosuch x=1\n", "unknown module 'nosuch' in 'action'", "3:15"),
    ("- hosts: all\n  tasks:\n    - just a string\n", "must be a task (a mapping)", "3:7"),
    ("- hosts: all\n  tasks: {a: 1}\n", "'tasks' must be a list", "2:10"),
    ("- name: no hosts\n  tasks: []\n", "play has no 'hosts'", "1:3"),
    ("- hosts: 3\n", "'hosts' must be a host pattern", "1:10"),
    ("- hosts: all\n  tasks:\n    - include_role: {name: '{{ r }}', public: true}\n",
     "a templated include_role with 'public: true' is not supported", "3:47"),
    ("- hosts: all\n  max_fail_percentage: 120\n", "'max_fail_percentage' must be a number from 0 to 100", "2:24"),
    ("- hosts: all\n  max_fail_percentage: 'ten'\n", "'max_fail_percentage' must be a number", "2:24"),
    ("- hosts: all\n  gather_facts: maybe\n", "'gather_facts' must be true or false", "2:17"),
    ("- hosts: all\n  vars_files: [3]\n", "'vars_files' items must be file paths", "2:16"),
    ("- hosts: all\n  roles: [x]\n", "role 'x' not found", "2:11"),
    ("- hosts: all\n  roles: [ns.coll.x]\n", "collections are not supported", "2:11"),
    ("- hosts: all\n- import_playbook: other.yml\n", "playbook not found: other.yml", "2:20"),
    ("- import_playbook: '{{ which }}.yml'\n", "a templated import_playbook", "1:20"),
    ("- import_playbook: a.yml\n  serial: 2\n", "unknown key 'serial' in import_playbook", "2:3"),
    ("- hosts: all\n  tasks:\n    - import_playbook: a.yml\n", "import_playbook is a playbook entry", "3:7"),
    ("- hosts: all\n- 42\n", "play #2 must be a mapping", "2:3"),
    ("hosts: all\n", "a playbook must be a list of plays", "1:1"),
    ("- hosts: all\n  tasks:\n    - command: ls\n      command: pwd\n", "duplicate key 'command' (first at line 3)", "4:7"),
    ("- hosts: all\n  tasks:\n    - command: [ls\n", "YAML syntax error", "4:1"),
]


@pytest.mark.parametrize("text, fragment, at", ERRORS, ids=[e[1][:40] for e in ERRORS])
def test_errors_name_exact_position(tmp_path, text, fragment, at):
    msg, where = bad(tmp_path, text)
    assert fragment in msg
    assert where == at


def test_empty_playbook(tmp_path):
    path = write(tmp_path, "# nothing\n")
    with pytest.raises(BadInput) as info:
        load_playbook(path, MODULES)
    assert "empty" in info.value.msg and info.value.where == path


def test_missing_playbook_file(tmp_path):
    with pytest.raises(BadInput) as info:
        load_playbook(str(tmp_path / "nope.yml"), MODULES)
    assert "nope.yml" in str(info.value)


def test_templated_arg_skips_literal_type_check(tmp_path):
    t = one_task(tmp_path, "- wait_for: {port: '{{ p }}'}\n")
    assert t.args == {"port": "{{ p }}"}


def test_handler_listen(tmp_path):
    book = load(tmp_path, """
        - hosts: all
          handlers:
            - command: restart
              listen: [restart things]
    """)
    h = book.plays[0].handlers[0]
    assert h.listen == ["restart things"] and h.is_handler and h.name is None


def test_set_fact_accepts_variable_names_only(tmp_path):
    t = one_task(tmp_path, "- set_fact: {a: 1, cacheable: true}\n")
    assert t.args == {"a": 1, "cacheable": True}
    msg, at = bad(tmp_path, "- hosts: all\n  tasks:\n    - set_fact: {ok: 1, 'bad-name': 2}\n")
    assert "invalid variable name 'bad-name'" in msg and at == "3:25"
    msg, at = bad(tmp_path, "- hosts: all\n  tasks:\n    - set_fact: {cacheable: 'x'}\n")
    assert "must be bool" in msg and at == "3:29"


def test_an_import_name_templated_from_play_vars_is_read_and_a_host_var_is_refused(tmp_path):
    (tmp_path / "debian.yml").write_text("- name: from the file\n  debug: {msg: hi}\n")
    book = load(tmp_path, "- hosts: all\n  vars: {family: debian}\n  tasks:\n"
                          "    - import_tasks: '{{ family }}.yml'\n")
    assert [t.name for t in book.plays[0].tasks[0].block] == ["from the file"]
    msg, at = bad(tmp_path, "- hosts: all\n  tasks:\n    - import_tasks: '{{ ansible_os_family }}.yml'\n")
    assert "can use play variables only" in msg and "ansible_os_family" in msg and at == "3:21"
