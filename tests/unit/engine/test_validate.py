"""Whole-playbook validation before any host is contacted: patterns, vars files, every variable."""
from __future__ import annotations

import os
import textwrap

import pytest

from fleetops.engine.playbook import load_playbook
from fleetops.engine.validate import FACT_NAMES, MAGIC_VARS, validate
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
    args = {"content": Arg(str), "dest": Arg(str, required=True), "mode": Arg((str, int))}


class Debug(Module):
    name = "debug"
    args = {"msg": Arg((str, dict, list)), "var": Arg(str)}


class SetFact(Module):
    name = "set_fact"
    args = {"cacheable": Arg(bool)}
    runs_on_controller = True
    any_args = True


MODULES = {"command": Command, "copy": Copy, "debug": Debug, "set_fact": SetFact}


class FakeInventory:
    """Just the interface validate uses: select(pattern), get_vars(host), hosts, path."""

    path = "inv.yml"

    def __init__(self):
        self.groups = {"all": ["h1", "h2", "h3"], "hermes": ["h1", "h2"], "db": ["h3"], "empty": []}
        self.hosts = {"h1": {}, "h2": {}, "h3": {}}
        self.host_vars = {"h1": {"hermes_user": "alice"}, "h2": {}, "h3": {"db_only": 1}}

    def select(self, pattern: str) -> list:
        out = []
        for part in pattern.split(":"):
            if not part or part.startswith(("&", "!")) and len(part) == 1:
                raise BadInput(f"bad host pattern {pattern!r}")
            if part.startswith("!"):
                out = [h for h in out if h not in self.groups.get(part[1:], [part[1:]])]
            elif part in self.groups:
                out += [h for h in self.groups[part] if h not in out]
            elif part in self.hosts and part not in out:
                out.append(part)
        return out

    def get_vars(self, host: str) -> dict:
        return dict(self.host_vars[host])


def write(tmp_path, text: str, name: str = "play.yml") -> str:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return str(path)


def run(tmp_path, text: str, extra_vars=None):
    book = load_playbook(write(tmp_path, text), MODULES)
    validate(book, FakeInventory(), extra_vars or {}, MODULES)


def bad(tmp_path, text: str, extra_vars=None) -> tuple[str, str]:
    """(message, where with the tmp dir stripped) of the BadInput validation raises."""
    with pytest.raises(BadInput) as info:
        run(tmp_path, text, extra_vars)
    exc = info.value
    assert "\n" not in str(exc)
    return exc.msg, (exc.where or "").replace(str(tmp_path) + os.sep, "")


def test_site_playbook_is_valid():
    book = load_playbook(os.path.join(DATA, "site.yml"), MODULES)
    validate(book, FakeInventory(), {}, MODULES)


def test_constants():
    assert "ansible_sqlite_version" in FACT_NAMES and "fleetops_sqlite_trigram" in FACT_NAMES
    assert {"inventory_hostname", "hostvars", "omit", "item", "fleetops_run_id"} <= MAGIC_VARS


# -- hosts

def test_pattern_matching_nothing(tmp_path):
    msg, where = bad(tmp_path, "- hosts: nosuch\n")
    assert msg == "hosts pattern 'nosuch' matches no host in inventory inv.yml"
    assert where == "play.yml:1:3"


def test_pattern_excluding_everything(tmp_path):
    msg, where = bad(tmp_path, "- hosts: all\n- hosts: [db, '!db']\n")
    assert "matches no host" in msg and where == "play.yml:2:3"


def test_bad_pattern_syntax_gets_the_hosts_position(tmp_path):
    msg, where = bad(tmp_path, "- hosts: 'all:!'\n")
    assert "bad host pattern" in msg and where == "play.yml:1:3"


# -- vars files

def test_missing_vars_file(tmp_path):
    (tmp_path / "ok.yml").write_text("a: 1\n")
    msg, where = bad(tmp_path, "- hosts: all\n  vars_files:\n    - ok.yml\n    - nope.yml\n")
    assert msg.startswith("vars file not found:") and "nope.yml" in msg
    assert where == "play.yml:4:7"


def test_vars_file_syntax_error_has_its_own_position(tmp_path):
    write(tmp_path, "ok: 1\nbroken: [1, 2\nother: 3\n", "vars/bad.yml")
    msg, where = bad(tmp_path, "- hosts: all\n  vars_files: vars/bad.yml\n")
    assert "YAML syntax error" in msg and where == "vars/bad.yml:3:6"


def test_vars_file_not_a_mapping(tmp_path):
    write(tmp_path, "- a\n- b\n", "v.yml")
    msg, where = bad(tmp_path, "- hosts: all\n  vars_files: [v.yml]\n")
    assert "must be a mapping" in msg and where == "v.yml:1:1"


def test_vars_file_variables_are_defined_and_checked(tmp_path):
    write(tmp_path, "base: /srv\nderived: '{{ base }}/x'\nbroken: '{{ nope }}'\n", "v.yml")
    msg, where = bad(tmp_path, "- hosts: all\n  vars_files: [v.yml]\n")
    assert msg == "undefined variable 'nope'" and where == "v.yml:3:1"


# -- variables

def test_undefined_variable_in_args_points_at_the_key(tmp_path):
    msg, where = bad(tmp_path, """
        - hosts: all
          tasks:
            - copy:
                dest: /tmp/x
                content: "{{ hermes_usr }}"
    """)
    assert msg == "undefined variable 'hermes_usr' (did you mean: hermes_user?)"
    assert where == "play.yml:5:9"


def test_undefined_in_free_form_points_at_module_key(tmp_path):
    msg, where = bad(tmp_path, "- hosts: all\n  tasks:\n    - name: x\n      command: ls {{ nope }}\n")
    assert msg == "undefined variable 'nope'" and where == "play.yml:4:7"


def test_undefined_in_nested_args(tmp_path):
    msg, where = bad(tmp_path, """
        - hosts: all
          tasks:
            - debug:
                msg:
                  list:
                    - fine
                    - inner: "{{ nope }}"
    """)
    assert msg == "undefined variable 'nope'" and where == "play.yml:7:15"


@pytest.mark.parametrize("key, value, at", [
    ("when", "nope > 1", "4:7"),
    ("when", "[true, 'nope']", "4:7"),
    ("until", "nope.rc == 0", "4:7"),
    ("failed_when", "nope", "4:7"),
    ("changed_when", "'{{ nope }}'", "4:7"),
    ("loop", "'{{ nope }}'", "4:7"),
    ("retries", "'{{ nope }}'", "4:7"),
    ("vars", "{a: '{{ nope }}'}", "4:14"),
])
def test_undefined_in_task_keywords(tmp_path, key, value, at):
    msg, where = bad(tmp_path, f"- hosts: all\n  tasks:\n    - command: ls\n      {key}: {value}\n")
    assert msg == "undefined variable 'nope'" and where == f"play.yml:{at}"


def test_undefined_in_play_vars(tmp_path):
    msg, where = bad(tmp_path, "- hosts: all\n  vars:\n    a: 1\n    b: '{{ a }}{{ nope }}'\n")
    assert msg == "undefined variable 'nope'" and where == "play.yml:4:5"


def test_template_syntax_error_points_at_key(tmp_path):
    msg, where = bad(tmp_path, "- hosts: all\n  tasks:\n    - debug:\n        msg: '{{ a + }}'\n")
    assert msg.startswith("template error: syntax") and where == "play.yml:4:9"


def test_condition_syntax_error(tmp_path):
    msg, where = bad(tmp_path, "- hosts: all\n  tasks:\n    - command: ls\n      when: a b\n")
    assert msg.startswith("template error: syntax") and where == "play.yml:4:7"


def test_everything_that_defines_a_name(tmp_path):
    (tmp_path / "f.yml").write_text("from_file: 1\n")
    run(tmp_path, """
        - hosts: hermes
          vars: {play_var: 1}
          vars_files: [f.yml]
          tasks:
            - command: "echo {{ play_var }} {{ from_file }} {{ from_extra }} {{ hermes_user }}"
              register: reg
            - set_fact:
                fact_a: "{{ reg.stdout }}"
                cacheable: true
            - debug:
                msg: "{{ fact_a }} {{ later }} {{ ansible_sqlite_version }} {{ inventory_hostname }}"
            - debug: {msg: "{{ item }} {{ ansible_loop.index }} {{ task_var }}"}
              loop: "{{ groups['all'] }}"
              vars: {task_var: "{{ omit }}"}
            - debug: {msg: "{{ pkg }}"}
              loop: [1, 2]
              loop_control: {loop_var: pkg}
            - block:
                - debug: {msg: "{{ block_var }}"}
              rescue:
                - debug: {msg: "{{ ansible_failed_result.msg }} {{ ansible_failed_task }}"}
              vars: {block_var: 1}
            - command: "true"
              register: later
    """, extra_vars={"from_extra": 1})


def test_names_stay_scoped(tmp_path):
    # hermes_user is a var of h1 only; play targets db (h3): not defined there
    msg, _ = bad(tmp_path, "- hosts: db\n  tasks:\n    - debug: {msg: '{{ hermes_user }}'}\n")
    assert msg == "undefined variable 'hermes_user'"
    # a custom loop_var is not visible in another task
    msg, where = bad(tmp_path, """
        - hosts: all
          tasks:
            - debug: {msg: "{{ pkg }}"}
              loop: [1]
              loop_control: {loop_var: pkg}
            - debug: {msg: "{{ pkg }}"}
    """)
    assert msg == "undefined variable 'pkg'" and where == "play.yml:6:15"
    # block vars are not visible after the block; rescue vars not outside rescue
    msg, _ = bad(tmp_path, """
        - hosts: all
          tasks:
            - block:
                - debug: {msg: "{{ bv }}"}
              vars: {bv: 1}
            - debug: {msg: "{{ bv }}"}
    """)
    assert msg == "undefined variable 'bv'"
    msg, _ = bad(tmp_path, "- hosts: all\n  tasks:\n    - debug: {msg: '{{ ansible_failed_result }}'}\n")
    assert msg == "undefined variable 'ansible_failed_result'"


def test_guards_and_defaults_are_accepted(tmp_path):
    run(tmp_path, """
        - hosts: all
          tasks:
            - debug: {msg: "{{ maybe }}"}
              when: maybe is defined
            - debug: {msg: "{{ other | default('x') }} {% if z is defined %}{{ z }}{% endif %}"}
            - block:
                - debug: {msg: "{{ guarded }}"}
              when: guarded is defined
    """)


def test_registered_in_earlier_play_is_known(tmp_path):
    run(tmp_path, """
        - hosts: all
          tasks:
            - command: "true"
              register: first
        - hosts: all
          tasks:
            - debug: {msg: "{{ first.rc }}"}
    """)


# -- notify

def test_notify_must_match_handler_name_or_listen(tmp_path):
    run(tmp_path, """
        - hosts: all
          tasks:
            - command: ls
              notify: [restart, topic]
          handlers:
            - name: restart
              command: restart
            - name: other
              command: x
              listen: topic
    """)
    msg, where = bad(tmp_path, """
        - hosts: all
          tasks:
            - command: ls
              notify: restrat
          handlers:
            - name: restart
              command: restart
    """)
    assert msg == "notify 'restrat' matches no handler name or listen (did you mean: restart?)"
    assert where == "play.yml:4:7"


def test_notify_without_handlers(tmp_path):
    msg, _ = bad(tmp_path, "- hosts: all\n  tasks:\n    - command: ls\n      notify: x\n")
    assert "the play has no handlers" in msg


# -- modules

def test_module_missing_from_registry_given_to_validate(tmp_path):
    book = load_playbook(write(tmp_path, "- hosts: all\n  tasks:\n    - debug: {msg: x}\n"), MODULES)
    with pytest.raises(BadInput) as info:
        validate(book, FakeInventory(), {}, {"command": Command})
    assert info.value.msg == "unknown module 'debug'" and info.value.where.endswith("play.yml:3:7")


def test_sandbox_escape_in_playbook_is_undefined_or_refused_before_running(tmp_path):
    # validation cannot run templates, but a later render refuses: see test_templating;
    # here the escape must at least not hide an undefined name
    msg, _ = bad(tmp_path, "- hosts: all\n  tasks:\n    - debug: {msg: '{{ evil.__class__ }}'}\n")
    assert msg == "undefined variable 'evil'"


# ---------------------------------------------------------------- templated serial / max_fail_percentage

LIMITS = """
- hosts: all
  vars:
    batch: [1, "10%"]
  serial: "{{ rollout | default(batch) }}"
  max_fail_percentage: "{{ max_fail | default(0) }}"
  tasks:
    - command: "true"
"""


def _limits(tmp_path, extra_vars):
    book = load_playbook(write(tmp_path, LIMITS), MODULES)
    validate(book, FakeInventory(), extra_vars, MODULES)
    return book.plays[0].serial, book.plays[0].max_fail_percentage


def test_templated_serial_and_max_fail_from_play_vars_and_extra_vars(tmp_path):
    assert _limits(tmp_path, {}) == ([1, "10%"], 0.0)
    # -e key=value gives strings: they are read as the literal forms are
    assert _limits(tmp_path, {"rollout": "5", "max_fail": "20"}) == ([5], 20.0)
    assert _limits(tmp_path, {"rollout": [2, "50%"], "max_fail": 12.5}) == ([2, "50%"], 12.5)
    # a template inside a serial list
    book = load_playbook(write(tmp_path, "- hosts: all\n  serial: [1, '{{ step }}']\n  tasks: []\n"), MODULES)
    validate(book, FakeInventory(), {"step": "25%"}, MODULES)
    assert book.plays[0].serial == [1, "25%"]


@pytest.mark.parametrize("extra, fragment", [
    ({"rollout": "0"}, "'serial' entries must be positive integers"),
    ({"rollout": "lots"}, "'serial' entries must be positive integers or '1%'..'100%', not 'lots'"),
    ({"max_fail": "150"}, "'max_fail_percentage' must be a number from 0 to 100, not 150.0"),
    ({"max_fail": "some"}, "'max_fail_percentage' must be a number from 0 to 100, not 'some'"),
])
def test_templated_limits_are_checked_before_the_run(tmp_path, extra, fragment):
    msg, where = bad(tmp_path, LIMITS, extra)
    assert fragment in msg
    assert where == ("play.yml:4:11" if "rollout" in extra else "play.yml:5:24")


def test_templated_limit_with_an_undefined_variable(tmp_path):
    msg, where = bad(tmp_path, "- hosts: all\n  serial: '{{ per_batch }}'\n  tasks: []\n")
    assert msg.startswith("undefined variable 'per_batch' in 'serial'") and where == "play.yml:2:11"
    # host variables do not apply: batches are cut before any host runs
    msg, _ = bad(tmp_path, "- hosts: all\n  max_fail_percentage: '{{ hermes_user }}'\n  tasks: []\n")
    assert "undefined variable 'hermes_user'" in msg


def test_task_files_that_include_each_other_by_a_template_are_each_read_once(tmp_path, monkeypatch):
    """trellis' deploy role: every task file ends with `include_tasks: "{{ include_path.item }}"`,
    so each could name any other; read along every path through them, listing trellis/deploy.yml
    took 43 s. Each is read once, and the names every one of them defines stay known."""
    from fleetops.engine.playbook import includes
    n = 7
    for k in range(n):
        write(tmp_path, f"""
            - set_fact: {{fact_{k}: {k}}}
            - include_tasks: "{{{{ next_file }}}}"
        """, name=f"tasks/t{k}.yml")
    reads: dict = {}
    real = includes.load_yaml

    def counted(path, *a, **kw):
        reads[os.path.basename(path)] = reads.get(os.path.basename(path), 0) + 1
        return real(path, *a, **kw)
    monkeypatch.setattr(includes, "load_yaml", counted)
    uses = " ".join("{{ fact_%d }}" % k for k in range(n))
    run(tmp_path, f"""
        - hosts: all
          tasks:
            - include_tasks: "tasks/{{{{ first_file }}}}"
            - debug: {{msg: "{uses}"}}
    """, extra_vars={"first_file": "t0.yml", "next_file": "t1.yml"})
    reads.pop("play.yml")
    assert reads == {f"t{k}.yml": 1 for k in range(n)}


# -- a handler's include that cannot be read

HANDLER_PLAY = """
- hosts: all
  tasks:
    - debug: {msg: hi}
      notify: {notify}
  handlers:
    - name: clean (windows)
      include_tasks: windows.yml
    - name: clean
      debug: {msg: clean}
"""


def test_a_handler_nothing_notifies_is_not_refused_for_its_file(tmp_path):
    write(tmp_path, "- name: delete\n  win_file: {path: x, state: absent}\n", "windows.yml")
    run(tmp_path, HANDLER_PLAY.replace("{notify}", "clean"))


@pytest.mark.parametrize("notify", ["clean (windows)", "'{{ which }}'"])
def test_a_handler_a_task_can_notify_is_refused_at_its_file(tmp_path, notify):
    write(tmp_path, "- name: delete\n  win_file: {path: x, state: absent}\n", "windows.yml")
    msg, where = bad(tmp_path, HANDLER_PLAY.replace("{notify}", notify), {"which": "clean"})
    assert msg.startswith("unknown module 'win_file'") and where == "windows.yml:2:3"
