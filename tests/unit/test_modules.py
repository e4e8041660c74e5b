"""Generic modules through the executor on the LocalTransport (payloads really run under python3)."""
from __future__ import annotations

import os

import pytest

from fleetops.errors import BadInput
from fleetops.extensions import registry
from fleetops.modules.file import File
from fleetops.modules.lineinfile import LineInFile


def test_registry_has_generic_modules():
    mods = registry().modules
    for name in ("command", "shell", "copy", "template", "file", "fetch", "wait_for", "assert",
                 "set_fact", "debug", "python"):
        assert mods[name].name == name


def test_copy_template_file_idempotent_second_run_changes_nothing(run, tmp_path):
    play = """
        - hosts: web
          gather_facts: false
          vars:
            port: 8080
          tasks:
            - name: dir
              file: {path: "@TMP@/{{ inventory_hostname }}", state: directory}
            - name: copy
              copy: {src: app.conf, dest: "@TMP@/{{ inventory_hostname }}/", mode: "0644"}
            - name: template
              template: {src: svc.conf.j2, dest: "@TMP@/{{ inventory_hostname }}/svc.conf"}
    """
    files = {"files/app.conf": "static\n", "templates/svc.conf.j2": "host={{ inventory_hostname }}\nport={{ port }}\n"}
    first, rec1 = run(play, files=files, diff=True)
    assert first.exit_code == 0, rec1.failures()
    assert first.stats["h1"]["changed"] == 3
    assert (tmp_path / "h1" / "app.conf").read_text() == "static\n"
    assert (tmp_path / "h2" / "svc.conf").read_text() == "host=h2\nport=8080\n"
    assert "+port=8080" in rec1.results("template")["h2"]["diff"]
    second, rec2 = run(play, files=files, diff=True)
    assert second.exit_code == 0
    assert all(s["changed"] == 0 for s in second.stats.values()), second.stats
    assert rec2.results("template")["h1"]["diff"] == ""


def test_fetch_into_results_dir(run, tmp_path):
    (tmp_path / "remote.txt").write_text("payload")
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: get
              fetch: {src: "@TMP@/remote.txt"}
            - name: renamed
              fetch: {src: "@TMP@/remote.txt", dest: sub/copy.txt}
            - name: missing ok
              fetch: {src: "@TMP@/none.txt", fail_on_missing: false}
            - name: missing
              fetch: {src: "@TMP@/none.txt"}
    """)
    base = tmp_path / "runs" / "run-test" / "h1"
    assert (base / "remote.txt").read_text() == "payload"
    assert (base / "sub" / "copy.txt").read_text() == "payload"
    assert not rec.results("missing ok")["h1"]["failed"]
    assert rec.results("missing")["h1"]["failed"] and outcome.exit_code == 2


def test_python_payload_module_and_facts(run):
    outcome, rec = run("""
        - hosts: h1
          gather_facts: true
          tasks:
            - name: wait
              python: {payload: wait_for, args: {path: /, timeout: 2}}
            - name: facts visible
              assert:
                that:
                  - ansible_facts is mapping
                  - ansible_facts | length > 0
            - name: bad payload
              python: {payload: "../etc/passwd"}
              ignore_errors: true
    """)
    assert outcome.exit_code == 0, rec.failures()
    assert rec.of("host_facts") and rec.of("host_facts")[0][0] == "h1"
    assert "elapsed" in rec.results("wait")["h1"]
    assert "no payload" in rec.results("bad payload")["h1"]["msg"]


def test_command_argv_quoting_and_creates(run, tmp_path):
    (tmp_path / "exists").write_text("")
    outcome, rec = run("""
        - hosts: h1
          gather_facts: false
          tasks:
            - name: expanded
              command: {argv: [echo, "$HOME; rm -rf /tmp/x", "*", "$NO_SUCH_VAR_ZZ"]}
            - name: literal
              command: {argv: [echo, "$HOME; rm -rf /tmp/x", "*"], expand_argument_vars: false}
            - name: creates
              command: touch @TMP@/should-not
              args: {creates: "@TMP@/exists"}
            - name: stdin and chdir
              shell: cat - ; pwd
              args: {stdin: hello, chdir: "@TMP@"}
    """)
    assert outcome.exit_code == 0
    # as ansible-core: $VARS and ~ expanded on the host, nothing else interpreted
    assert rec.results("expanded")["h1"]["stdout"] == os.path.expanduser("~") + "; rm -rf /tmp/x * $NO_SUCH_VAR_ZZ"
    assert rec.results("literal")["h1"]["stdout"] == "$HOME; rm -rf /tmp/x *"
    assert not rec.results("creates")["h1"]["changed"] and not (tmp_path / "should-not").exists()
    assert rec.results("stdin and chdir")["h1"]["stdout_lines"] == ["hello", str(tmp_path)]


def test_path_and_its_aliases_exactly_one():
    for cls in (File, LineInFile):
        cls.check_static({"dest": "/x"}, "pb.yml:3")
        with pytest.raises(BadInput, match=f"module '{cls.name}' needs argument 'path'"):
            cls.check_static({"state": "absent"}, "pb.yml:3")
        with pytest.raises(BadInput, match=f"{cls.name}: 'path' and 'name' are the same argument"):
            cls.check_static({"path": "/x", "name": "/y"}, "pb.yml:3")
