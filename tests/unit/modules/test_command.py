"""`command` expands ~ and $VARS in its arguments as ansible-core does on the host.

ansible-core's command module runs os.path.expanduser(os.path.expandvars(arg)) on the host
(expand_argument_vars, default true). The oracle here is that same Python function, run with
the same environment the sh word fleetops builds is evaluated in (dash, the Debian /bin/sh).
"""
from __future__ import annotations

import os
import subprocess

from hypothesis import given, settings, strategies as st

from fleetops.modules.command import host_word

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/op", "SET": "a b;*", "EMPTY": "", "X1": "$SET"}


def on_host(word: str) -> str:
    return subprocess.run(["/bin/sh", "-c", f"printf %s {word}"], env=ENV, capture_output=True,
                          text=True, check=True).stdout


def python_expands(text: str) -> str:
    old = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(ENV)
        return os.path.expanduser(os.path.expandvars(text))
    finally:
        os.environ.clear()
        os.environ.update(old)


SAMPLES = ["~/marker", "~", "~root/x", "~nosuchuser_zz/x", "$HOME/.cfg", "${HOME}/x", "$SET", "${SET}",
           "$UNSET", "${UNSET}/y", "$EMPTY.", "a$", "${}", "${1}", "$1", "it's \"q\"", "$X1", "*",
           "x;y", "~/$SET/~", "pre${HOME}post", "$HOME$HOME", "\\$HOME", "${SE T}"]


def test_known_forms_match_python():
    for text in SAMPLES:
        assert on_host(host_word(text)) == python_expands(text), text


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="~/$ {}\\'\"*;aHOMESTUN_1.-", max_size=14))
def test_any_argument_matches_python(text):
    assert on_host(host_word(text)) == python_expands(text)


def test_expansion_off_keeps_text():
    for text in SAMPLES:
        assert on_host(host_word(text, expand=False)) == text


def test_command_module_creates_removes_chdir_glob(run, tmp_path):
    """`touch ~/marker` works; creates/removes are globs relative to chdir, expanded like paths."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "a.done").write_text("")
    outcome, rec = run(f"""
        - hosts: h1
          gather_facts: false
          vars: {{w: "{work}"}}
          tasks:
            - name: tilde
              command: touch ~/fo14-marker-{os.getpid()}
            - name: glob exists
              command: touch should-not
              args: {{chdir: "{{{{ w }}}}", creates: "*.done"}}
            - name: glob missing
              command: touch ran
              args: {{chdir: "{{{{ w }}}}", removes: "*.missing"}}
            - name: runs
              command: touch created
              args: {{chdir: "{{{{ w }}}}", creates: "created"}}
            - name: stdin
              command: cat
              args: {{stdin: hello}}
    """)
    marker = os.path.expanduser(f"~/fo14-marker-{os.getpid()}")
    try:
        assert outcome.exit_code == 0, rec.failures()
        assert os.path.exists(marker)
    finally:
        if os.path.exists(marker):
            os.unlink(marker)
    r = rec.results("glob exists")["h1"]
    assert (r["changed"], r["rc"], r["msg"]) == (False, 0, "Did not run command since '*.done' exists")
    assert not (work / "should-not").exists() and not (work / "ran").exists()
    assert rec.results("glob missing")["h1"]["stdout"] == "skipped, since *.missing does not exist"
    assert rec.results("runs")["h1"]["changed"] and (work / "created").exists()
    assert rec.results("stdin")["h1"]["stdout"] == "hello"
