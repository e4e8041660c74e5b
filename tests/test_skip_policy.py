"""The skip policy itself: an allow-listed skip passes, any other skip fails the run, shown by name."""
from __future__ import annotations

import os
import subprocess
import sys
from tests.support.paths import REPO

ROOT = REPO


def _pytest(tmp_path, reason):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n\ndef test_ok():\n    pass\n\n"
        f"def test_gone():\n    pytest.skip({reason!r})\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "tests.support.skip_policy",
                           "-rs", "-q", "test_x.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_skip_outside_the_allow_list_fails_the_run(tmp_path):
    p = _pytest(tmp_path, "needs something this machine lacks")
    assert p.returncode == 1, p.stdout
    assert "skips outside the allow-list" in p.stdout
    assert "test_x.py::test_gone: needs something this machine lacks" in p.stdout
    assert "SKIPPED [1] test_x.py:7: needs something this machine lacks" in p.stdout   # -rs


def test_an_allow_listed_skip_passes_and_is_still_shown(tmp_path):
    p = _pytest(tmp_path, "mixed lab unavailable: no Debian mirror serves bullseye (...)")
    assert p.returncode == 0, p.stdout
    assert "SKIPPED [1]" in p.stdout and "no Debian mirror serves" in p.stdout
