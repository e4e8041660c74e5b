"""Every test here that stops writers and never swaps leaves its fence keeper: ended by PID."""
import json

import pytest

from fleetops.remote.sqlite import fence as sqlite_fence


@pytest.fixture(autouse=True)
def _no_fence_left(tmp_path):
    """A test that stops writers and never swaps leaves its fence keeper: end it by PID."""
    yield
    keepers = [k for rec in tmp_path.glob("**/fleetops/state/*-fence.json")
               for k in json.loads(rec.read_text()).get("keepers") or []]
    sqlite_fence.release(keepers)
