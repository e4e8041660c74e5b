"""Every single-bit flip of one child pointer (the sessions root's right-most, bits 0..12:
the pointer then names a page of another tree, an FTS leaf, an overflow page or a page past
the end of the file), each salvaged: the orphaned leaf's intact rows all come back, no row
of the page now named becomes a session, and nothing else changes."""
import os

import pytest

from fleetops.remote.hermes.salvage_rules import RULES
from fleetops.remote.sqlite import salvage as engine
from tests.corpus import damage, truth
from tests.unit.remote.sqlite.test_salvage_corpus import out_rows


@pytest.mark.parametrize("bit", range(13))
def test_flipped_child_pointer_loses_no_intact_row(pristine, tmp_path, bit):
    d = damage.interior_child_pointer_bit_flipped(pristine, tmp_path / "src" / "state.db", bit=bit)
    out = tmp_path / "out" / "state.db"
    os.makedirs(os.path.dirname(str(out)))
    rep = engine.salvage(d.path, str(out), rules=RULES)
    gt = truth.ground_truth(d.truth_path)["tables"]
    for table in ("sessions", "messages"):
        got = out_rows(str(out), table)
        assert set(got) == d.expected_rows[table], (d.description, table)
        assert all(got[r] == gt[table]["rows"][r] for r in got), (d.description, table)
    s = rep["tables"]["sessions"]
    assert s["loss_rows"] == 0 and rep["loss_rows"] == 0, d.description
    assert rep["verification"]["ok"] is True
