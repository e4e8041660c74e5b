"""bench/audit_detect.py at a small size: on seeded copies with random bit flips in random pages of
a store written by Hermes' own SessionDB, the default audit sees every copy this SQLite's
integrity_check sees, and calls no copy damaged whose flips nothing reads."""
from __future__ import annotations

import sys

from tests.support.paths import REPO

sys.path.insert(0, str(REPO / "bench"))
import audit_detect  # noqa: E402


def test_default_audit_sees_what_integrity_check_sees(standard_src, tmp_path):
    res = audit_detect.run(8, 3600, 40, str(tmp_path), log=lambda *a: None, healthy=4, other=False)
    integ = "integrity_check %s" % audit_detect.sqlite3.sqlite_version
    seen_by_integrity = [c for c in res["copies"] if c["harmful"] and c["seen"][integ]]
    harmless = [c for c in res["copies"] if not c["harmful"]]
    assert seen_by_integrity and len(harmless) >= 4      # the sample holds both kinds: the test can fail
    missed = [(c["flips"], c["verdict"]) for c in seen_by_integrity if not c["seen"]["inspect"]]
    assert missed == []
    alarms = [(c["flips"], c["verdict"], c["reason"]) for c in harmless if c["seen"]["inspect"]]
    assert alarms == []
