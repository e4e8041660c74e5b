"""Secret names against every name fleetops itself shows: no result field of a bundled payload or
module, no variable a bundled playbook registers or sets, no table, column, index, trigger or view
of any Hermes version's store is a secret name (0.22's idx_sessions_session_key made the count
109 a secret and verify printed "Total sessions: ********"). Real credential names still are.
"""
from __future__ import annotations

import ast
import sqlite3
from pathlib import Path

import pytest
import yaml

from fleetops.engine.secrets import MASK, collect_secret_values, is_secret_name, mask, scrub
from tests.support import hermes_matrix

REPO = Path(__file__).resolve().parents[3]
PRODUCT = REPO / "fleetops"


def result_fields() -> dict:
    """{name: file} of every string a payload or module uses as a dict key (a result's fields)."""
    out: dict = {}
    for sub in ("remote", "hermes", "modules"):
        for p in sorted((PRODUCT / sub).rglob("*.py")):
            for n in ast.walk(ast.parse(p.read_text())):
                keys = []
                if isinstance(n, ast.Dict):
                    keys = list(n.keys)
                elif isinstance(n, ast.Subscript):
                    keys = [n.slice]
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and \
                        n.func.attr in ("get", "setdefault", "pop") and n.args:
                    keys = [n.args[0]]
                for k in keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        out.setdefault(k.value, str(p.relative_to(REPO)))
    return out


def playbook_names() -> dict:
    """{name: playbook} of every variable a bundled playbook registers, sets or loops with."""
    out: dict = {}

    def walk(node, where):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "register" and isinstance(v, str):
                    out.setdefault(v, where)
                elif k == "set_fact" and isinstance(v, dict):
                    for name in v:
                        out.setdefault(name, where)
                elif k == "loop_control" and isinstance(v, dict) and isinstance(v.get("loop_var"), str):
                    out.setdefault(v["loop_var"], where)
                walk(v, where)
        elif isinstance(node, list):
            for v in node:
                walk(v, where)
    books = sorted((PRODUCT / "playbooks").glob("*.yml"))
    assert len(books) >= 4
    for p in books:
        walk(yaml.safe_load(p.read_text()), p.name)
    return out


def test_no_result_field_is_a_secret_name():
    fields = result_fields()
    assert len(fields) > 500
    assert {k: v for k, v in fields.items() if is_secret_name(k)} == {}


def test_no_bundled_playbook_variable_is_a_secret_name():
    names = playbook_names()
    assert "repair_audit" in names and "repair_todo" in names
    assert {k: v for k, v in names.items() if is_secret_name(k)} == {}


def schema_names(db) -> set:
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        names = {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
        for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall():
            names |= {r[1] for r in c.execute('PRAGMA table_info("%s")' % t.replace('"', '""'))}
    finally:
        c.close()
    return names


@pytest.mark.parametrize("version", hermes_matrix.ALL)
def test_no_hermes_schema_name_is_a_secret_name(image_of, version):
    """Every store written by that version's own SessionDB (the corpus' standard one)."""
    names = schema_names(image_of(version))
    assert {"sessions", "messages", "idx_sessions_session_key", "session_key"} <= names
    assert sorted(n for n in names if is_secret_name(n)) == []


def test_a_count_under_an_index_name_is_not_scrubbed():
    """The field's symptom: a registered audit result holds 109 under idx_sessions_session_key."""
    registered = {"repair_audit": {"databases": [{"honesty": {"idx_sessions_session_key": 109,
                                                              "idx_messages_session": 4022},
                                                  "token_count": 12}]}}
    values = collect_secret_values(registered)
    assert values == set()
    assert scrub("Total sessions: 109", values) == "Total sessions: 109"
    assert mask(registered) == registered


@pytest.mark.parametrize("name", ["api_key", "OPENAI_API_KEY", "ssh_key", "private_key", "secret_key", "key2",
                                  "session_token", "auth_token", "refresh_token", "access_key_id",
                                  "db_password", "vault_secret", "signing_key", "STRIPE_KEY", "license_key"])
def test_real_credential_names_stay_secret(name):
    assert is_secret_name(name)
    assert mask({name: "s3cr3t"}) == {name: MASK}


def test_the_passwd_database_is_not_a_password():
    """getent's fact of the passwd database (names, ids, homes, an 'x') is shown: scrubbing its
    values hid every 'x' and '0' of a run's output; a passwd variable still is a secret."""
    assert not is_secret_name("getent_passwd")
    assert collect_secret_values({"getent_passwd": {"root": ["x", "0", "0", "root", "/root"]}}) == set()
    assert is_secret_name("db_passwd") and is_secret_name("passwd") and is_secret_name("getent_password")
