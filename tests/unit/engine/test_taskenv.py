"""The `environment` keyword: how its parts merge and render (ansible-core's rules), the shell
line that exports them run by a real /bin/sh, and that no value ever travels on a command line
(the transport is a real local one whose commands are recorded: `ps` on a host shows those)."""
from __future__ import annotations

import subprocess

import pytest

from fleetops.engine.connection.local import LocalTransport
from fleetops.engine.taskenv import EnvironmentError_, render_environment, wrap_line
from fleetops.engine.templating import Templar, TemplateError
from tests.support.playbook_run import run_yaml

T = Templar()


def test_parts_merge_outer_first_inner_wins_key_by_key():
    parts = [{"A": "play", "B": "play"}, "{{ proxy }}", {"B": "task", "N": 7, "F": True, "Z": None}]
    got = render_environment(parts, T, {"proxy": {"http_proxy": "http://p:3128", "A": "tmpl"}})
    assert got == {"A": "tmpl", "B": "task", "http_proxy": "http://p:3128", "N": "7", "F": "True", "Z": "None"}


def test_omit_drops_a_name_and_templates_see_the_hosts_variables():
    got = render_environment([{"H": "{{ inventory_hostname }}", "D": "{{ omit }}"}], T,
                             {"inventory_hostname": "h1", "omit": "__omit__"}, omit="__omit__")
    assert got == {"H": "h1"}


@pytest.mark.parametrize("parts, variables, fragment", [
    (["{{ notmap }}"], {"notmap": "x=1"}, "environment must be a dictionary, received 'x=1'"),
    ([{"BAD-NAME": "v"}], {}, "environment variable name 'BAD-NAME' is not valid"),
    ([{"1X": "v"}], {}, "is not valid"),
    ([{"X": "a\0b"}], {}, "NUL"),
])
def test_what_a_shell_cannot_export_fails_the_task(parts, variables, fragment):
    with pytest.raises(EnvironmentError_) as exc:
        render_environment(parts, T, variables)
    assert fragment in str(exc.value)


def test_an_undefined_variable_is_a_template_error():
    with pytest.raises(TemplateError):
        render_environment([{"X": "{{ nope }}"}], T, {})


VALUES = {"PLAIN": "v", "SPACES": "a b  c", "QUOTES": "it's \"q\"", "DOLLAR": "$HOME `id` $(id)",
          "NEWLINES": "one\ntwo\n\nthree\n", "BACKSLASH": "a\\nb\\", "EMPTY": "", "UNICODE": "héllo ✓",
          "CR": "a\rb", "TAB": "a\tb"}


def test_the_wrapped_line_exports_every_value_exactly_and_keeps_the_programs_stdin():
    prog = "python3 -c 'import os,sys,json; print(json.dumps([dict((k, os.environ.get(k)) for k in sys.argv[1:]), sys.stdin.read()]))' " + " ".join(VALUES)
    line, stdin = wrap_line(prog, VALUES, b"rest of stdin\nline 2\n")
    assert "\n" not in line                  # one line: any login shell carries it
    out = subprocess.run(["/bin/sh", "-c", line], input=stdin, capture_output=True, check=True).stdout
    import json
    env, rest = json.loads(out)
    assert env == VALUES and rest == "rest of stdin\nline 2\n"


def test_no_stdin_line_means_the_program_does_not_run():
    line, _ = wrap_line("echo ran", {"A": "1"}, None)
    p = subprocess.run(["/bin/sh", "-c", line], input=b"", capture_output=True)
    assert p.returncode == 125 and p.stdout == b""


def test_nothing_to_export_leaves_the_line_alone():
    assert wrap_line("echo x", {}, None) == ("echo x", None)


class Recording(LocalTransport):
    """The real local transport, remembering every command line it was given."""

    lines: list = []

    def run(self, command, stdin=None, timeout=None, max_output=None):
        Recording.lines.append(command)
        return super().run(command, stdin=stdin, timeout=timeout, max_output=max_output)

    def run_payload(self, command, line, timeout=None, max_output=None):
        Recording.lines.append(command)
        return super().run_payload(command, line, timeout=timeout, max_output=max_output)


SECRET = "Zq9-value-that-must-not-show-4471"


def test_values_reach_commands_and_payloads_but_never_a_command_line(tmp_path):
    Recording.lines = []
    outcome, rec = run_yaml(tmp_path, f"""
        - hosts: h1
          gather_facts: true
          environment: {{API_TOKEN: "{SECRET}", PLAIN: "p{SECRET}"}}
          tasks:
            - name: shell
              shell: 'printf %s "$API_TOKEN" | wc -c'
              register: r
            - name: creates
              command: echo ran
              args: {{creates: "/nonexistent/$PLAIN"}}
            - name: payload
              stat: {{path: "/tmp/$PLAIN"}}
              register: s
        """, transport_factory=Recording)
    assert outcome.exit_code == 0, rec.failures()
    assert rec.results("shell")["h1"]["stdout"] == str(len(SECRET))
    assert rec.results("payload")["h1"]["stat"]["exists"] is False
    assert rec.results("creates")["h1"]["stdout"] == "ran"
    facts = rec.results("Gathering Facts")["h1"]["ansible_facts"]
    assert "API_TOKEN" in facts["ansible_env"]             # the facts payload ran with it
    assert len(Recording.lines) >= 4
    assert not [line for line in Recording.lines if SECRET in line]
