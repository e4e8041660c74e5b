"""import_playbook: the imported file's plays read before the run, with the entry's tags, vars and
`when` as ansible-core applies them (listing parity with ansible-playbook is in
tests/scenario/compat/test_playbook_oracle.py, on ansible-core's own import_playbook targets)."""
from __future__ import annotations

import textwrap

import pytest

from fleetops.engine.playbook import load_playbook
from fleetops.errors import BadInput
from fleetops.extensions import registry
from tests.support.playbook_run import run_yaml


def write(base, rel, text):
    p = base / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text))
    return str(p)


def test_nested_imports_resolve_beside_each_file(tmp_path):
    write(tmp_path, "sub/inner.yml", """
        - hosts: all
          vars: {who: inner}
          tasks: [{debug: {msg: "{{ who }}"}}]
    """)
    write(tmp_path, "sub/middle.yml", "- import_playbook: inner.yml\n")
    top = write(tmp_path, "site.yml", """
        - hosts: all
          tasks: [{debug: {msg: first}}]
        - ansible.builtin.import_playbook: sub/middle.yml
          tags: [deploy]
          vars: {who: from_import}
          when: go | default(true)
    """)
    book = load_playbook(top, registry().modules)
    assert len(book.plays) == 2
    inner = book.plays[1]
    assert inner.tags == ["deploy"] and inner.tasks[0].tags == ["deploy"]
    assert inner.vars["who"] == "from_import"                  # the entry's vars win over the play's
    assert inner.tasks[0].when == ["go | default(true)"]
    assert inner.base_dir == str(tmp_path / "sub")


def test_import_when_does_not_guard_handlers(tmp_path):
    write(tmp_path, "other.yml", """
        - hosts: all
          tasks: [{debug: {msg: x}, notify: h}]
          handlers: [{name: h, debug: {msg: handled}}]
    """)
    top = write(tmp_path, "site.yml", "- import_playbook: other.yml\n  when: false\n")
    play = load_playbook(top, registry().modules).plays[0]
    assert play.tasks[0].when == [False] and play.handlers[0].when == []


@pytest.mark.parametrize("text, fragment", [
    ("- import_playbook: site.yml\n", "site.yml imports itself"),
    ("- import_playbook: missing.yml\n", "playbook not found: missing.yml"),
    ("- import_playbook: ns.coll.pb\n", "collections are not supported"),
    ("- import_playbook: empty.yml\n", "the playbook is empty"),
])
def test_import_refusals_name_the_entry(tmp_path, text, fragment):
    write(tmp_path, "empty.yml", "# nothing\n")
    top = write(tmp_path, "site.yml", text)
    with pytest.raises(BadInput) as exc:
        load_playbook(top, registry().modules)
    assert fragment in exc.value.msg
    assert exc.value.where.endswith("site.yml:1:20")


def test_imported_play_runs_with_its_own_templates_dir(tmp_path):
    """A play imported from a subdirectory finds templates/ beside its own file, as in Ansible."""
    outcome, rec = run_yaml(tmp_path, """
        - import_playbook: sub/web.yml
          vars: {greeting: hi}
    """, files={"sub/web.yml": textwrap.dedent("""
        - hosts: h1
          gather_facts: false
          tasks:
            - template: {src: t.j2, dest: "@TMP@/out.txt"}
    """).replace("@TMP@", str(tmp_path)), "sub/templates/t.j2": "{{ greeting }} from {{ inventory_hostname }}\n"})
    assert outcome.exit_code == 0, rec.failures()
    assert (tmp_path / "out.txt").read_text() == "hi from h1\n"
