"""Every verdict, condition and warning code the audit can emit has a runbook entry.

The codes are read from the audit payload's own source (scripts/docs_reference.audit_codes: the
modules the payload ships, walked for VERDICTS, verdict assignments, conditions and warning
`{"code": …}` literals), so a new code added anywhere the audit runs fails here until
docs/runbooks.md says what it means and what to do."""
from __future__ import annotations

import importlib.util

from tests.support.paths import REPO

RUNBOOKS = REPO / "docs" / "runbooks.md"


def _reference():
    spec = importlib.util.spec_from_file_location("docs_reference", REPO / "scripts" / "docs_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_audit_code_has_a_runbook_entry():
    ref = _reference()
    codes = set().union(*ref.audit_codes().values())
    assert not codes - ref.runbook_anchors(RUNBOOKS.read_text())


def test_no_runbook_entry_for_a_code_the_audit_cannot_emit():
    ref = _reference()
    codes = set().union(*ref.audit_codes().values())
    assert not ref.runbook_anchors(RUNBOOKS.read_text()) - codes


def test_the_reader_finds_the_known_codes_of_each_kind():
    codes = _reference().audit_codes()
    assert {"healthy", "structural_corruption", "not_persisting", "retired_wal"} <= codes["verdict"]
    assert {"structural_corruption", "not_persisting", "retired_wal"} <= codes["condition"]
    assert {"wal_reset_bug", "holders_unknown", "no_verified_backup", "write_errors"} <= codes["warning"]


def test_a_new_code_in_the_audit_source_is_caught(monkeypatch):
    """The check fails on code that emits a code the page does not have: a warning, a verdict
    assigned in place, a condition appended."""
    ref = _reference()
    real = ref._audit_modules()
    extra = ('def f(rec, w, conds):\n'
             '    w.append({"code": "brand_new_warning", "msg": "x"})\n'
             '    rec["verdict"] = "brand_new_verdict"\n'
             '    rec["conditions"].append("brand_new_condition")\n')
    monkeypatch.setattr(ref, "_audit_modules", lambda: {**real, "fleetops.remote.hermes.new": extra})
    codes = set().union(*ref.audit_codes().values())
    assert codes - ref.runbook_anchors(RUNBOOKS.read_text()) == {
        "brand_new_warning", "brand_new_verdict", "brand_new_condition"}
