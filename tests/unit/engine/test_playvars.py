"""The variables a task sees: the magic names the secret walk skips are exactly those the engine sets."""
from __future__ import annotations

import threading

from fleetops.engine import playvars
from fleetops.engine.inventory import load_inventory
from fleetops.engine.playcontext import PlayContext
from fleetops.engine.runcontext import HostState


def test_magic_names_are_what_the_engine_sets(tmp_path):
    inv_path = tmp_path / "inventory.ini"
    inv_path.write_text("[secret]\nweb1\n")
    inv = load_inventory(str(inv_path))
    states: dict = {}

    class Options:
        results_dir = str(tmp_path)
        diff = False
        extra_vars: dict = {}

    rv = playvars.RunVars(inventory=inv, options=Options(), state=lambda h: states.setdefault(h, HostState(h)),
                          playbook_dir=str(tmp_path), run_id="r1", omit="__omit__", lock=threading.Lock())
    pctx = PlayContext.__new__(PlayContext)
    pctx.hosts, pctx.batch, pctx.active = ["web1"], ["web1"], None
    magic = rv._magic(pctx, "web1", False)
    assert set(magic) == playvars.MAGIC_NAMES
    assert rv.secret_values(dict(magic, api_token="t0k3n")) == {"t0k3n"}


def test_groups_map_is_kept_until_a_group_changes(tmp_path):
    inv_path = tmp_path / "inventory.ini"
    inv_path.write_text("[web]\nweb1\nweb2\n")
    inv = load_inventory(str(inv_path))
    first = inv.groups_map()
    assert inv.groups_map() is first and first["web"] == ["web1", "web2"]
    inv.add_to_group("web2", "made")
    after = inv.groups_map()
    assert after is not first and after["made"] == ["web2"]
