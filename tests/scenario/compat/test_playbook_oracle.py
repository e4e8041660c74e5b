"""Real playbooks (tests/data/ansible/playbooks: ansible-core's own integration targets, trellis,
ansible-for-devops) listed by `ansible-playbook --list-hosts --list-tasks` (ansible-core 2.19, the
oracle) and by fleetops' own reading of them (`fleetops run --list-hosts --list-tasks`).

A playbook ansible-core lists must be listed the same by fleetops (hosts compared as a set: ansible
prints a set), or refused for a reason docs/guides/ansible-users.md "Differences from Ansible" names (REFUSALS), or be
one of DIFFERENCES. A playbook ansible-core refuses (a Galaxy role that is not there) fleetops
must refuse too.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from fleetops.engine.inventory import load_inventory
from fleetops.engine.listing import outline
from fleetops.engine.playbook import load_playbook
from fleetops.errors import BadInput
from fleetops.extensions import registry
from tests.support import oracle
from tests.support.paths import DATA

CORPUS = os.path.join(DATA, "ansible", "playbooks")
SKIP_DIRS = {"roles", "group_vars", "host_vars", "tasks", "handlers", "templates", "vars", "defaults",
             "molecule", "files", "meta"}
# fleetops refuses these on purpose (docs/guides/ansible-users.md "Differences from Ansible"): message fragments
REFUSALS = ("unknown module", "unknown argument", "a templated include_tasks file", "a templated include_role",
            "a templated import_role", "a loop over an include", "a templated import_playbook",
            "is not allowed on an include", "'strategy' must be one of",
            "must be true or false, not a string", "unknown key 'debugger'", "in 'action'",
            "argument 'cmd' of module 'meta' must be one of", "unknown key 'notify' in apply",
            "a task file must be a list of tasks", "must be a name, not nothing", "not found",
            "delegate_to", "delegate_facts", "must be a non-empty string", "vars_prompt",
            "is in a collection", "unknown key 'force_handlers'", "'notify' is not allowed on",
            "a handler needs a 'name'", "a templated tasks_from")
# listed, but not as ansible-core lists them (docs/guides/ansible-users.md "Differences from Ansible")
DIFFERENCES = {"ansible-core/tags/test_template_parent_tags.yml": "templated tags are not rendered"}
# The oracle's own results, one row per corpus playbook: what fleetops does with it beside
# ansible-core. The docs' Ansible compatibility page is rendered from this file
# (scripts/docs_reference.py) and every row is checked here, so the page cannot drift;
# FLEETOPS_ORACLE_RECORD=1 writes the rows this run finds instead of checking them.
RESULTS = os.path.join(DATA, "ansible", "playbook-oracle.tsv")

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")


def _is_playbook(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except (yaml.YAMLError, UnicodeDecodeError):
        return False
    return (isinstance(data, list) and bool(data)
            and all(isinstance(x, dict) and ("hosts" in x or "import_playbook" in x) for x in data))


def playbooks() -> list:
    out = []
    for root, dirs, files in os.walk(CORPUS):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in sorted(files):
            path = os.path.join(root, f)
            if f.endswith((".yml", ".yaml")) and _is_playbook(path):
                out.append(pytest.param(path, id=os.path.relpath(path, CORPUS)))
    return out


def _inventory(playbook: str, tmp_path) -> str:
    d = os.path.dirname(playbook)
    for name in ("inventory", "hosts.ini", "hosts", "inventory.yml"):
        if os.path.isfile(os.path.join(d, name)):
            return os.path.join(d, name)
    path = tmp_path / "inventory.ini"
    path.write_text("localhost ansible_connection=local\n")
    return str(path)


def test_corpus_is_attributed():
    with open(os.path.join(CORPUS, "INDEX.tsv"), encoding="utf-8") as fh:
        rows = [line.split("\t") for line in fh if not line.startswith("#")]
    assert {r[0] for r in rows} == {d for d in os.listdir(CORPUS) if os.path.isdir(os.path.join(CORPUS, d))}
    assert len(playbooks()) >= 100


def recorded() -> dict:
    """{corpus-relative path: outcome} from RESULTS."""
    if not os.path.exists(RESULTS):
        return {}
    with open(RESULTS, encoding="utf-8") as fh:
        return dict(line.rstrip("\n").split("\t", 1) for line in fh if line.strip() and not line.startswith("#"))


def _check_row(rel: str, outcome: str) -> None:
    rows = recorded()
    if os.environ.get("FLEETOPS_ORACLE_RECORD"):
        rows[rel] = outcome
        with open(RESULTS, "w", encoding="utf-8") as fh:
            fh.write("# path\toutcome beside ansible-core 2.19 (tests/scenario/compat/test_playbook_oracle.py)\n")
            fh.writelines(f"{k}\t{v}\n" for k, v in sorted(rows.items()))
        return
    assert rows.get(rel) == outcome, (f"{rel}: the oracle finds {outcome!r}, {RESULTS} says {rows.get(rel)!r} "
                                      "(FLEETOPS_ORACLE_RECORD=1 rewrites it)")


def test_the_results_table_lists_every_corpus_playbook():
    assert set(recorded()) == {p.id for p in playbooks()}


@pytest.fixture(scope="module")
def ansible_listings(tmp_path_factory):
    """`ansible-playbook --list-tasks --list-hosts` of every corpus playbook (the real command
    line), two at a time: {path: (inventory, completed process)}."""
    def one(path):
        inv = _inventory(path, tmp_path_factory.mktemp("inv"))
        return path, (inv, oracle.run("ansible-playbook", "-i", inv, path, "--list-tasks", "--list-hosts",
                                      cwd=os.path.dirname(path)))
    with ThreadPoolExecutor(2) as pool:
        return dict(pool.map(one, [p.values[0] for p in playbooks()]))


@pytest.mark.parametrize("path", playbooks())
def test_playbook_lists_as_ansible_core_lists_it(path, ansible_listings):
    inv, want = ansible_listings[path]
    rel = os.path.relpath(path, CORPUS)
    try:
        got = outline(load_playbook(path, registry().modules), load_inventory(inv))
    except BadInput as exc:
        if want.returncode != 0:
            _check_row(rel, "refused by both")
            return
        reasons = [f for f in REFUSALS if f in exc.msg]
        assert reasons, f"fleetops refuses, ansible-core lists it: {exc}"
        _check_row(rel, f"refused by fleetops: {reasons[0]}")
        return
    assert want.returncode == 0, f"ansible-core refuses what fleetops reads: {want.stderr[-500:]}"
    same = sorted(want.stdout.split("\n")) == sorted(got.split("\n"))
    assert same != (rel in DIFFERENCES), (want.stdout, got)
    _check_row(rel, "listed as ansible-core lists it" if same else f"listed differently: {DIFFERENCES[rel]}")
