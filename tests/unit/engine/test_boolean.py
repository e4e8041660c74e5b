"""The controller's one boolean rule against ansible-core's own `boolean` (the oracle), and the
readers that go through it."""
from __future__ import annotations

import pytest
from ansible.module_utils.parsing.convert_bool import boolean as ansible_boolean
from ansible.plugins.filter.core import to_bool as ansible_to_bool

from fleetops.engine.boolean import boolean, parse_bool, truthy
from fleetops.engine.module import flag
from fleetops.engine.templating.filters import FILTERS

WORDS = ["y", "Y", "yes", "YES", " on ", "1", "true", "True", "t", "T",
         "n", "N", "no", "off", "OFF", "0", "false", "False", "f", "F",
         "", "none", "2", "maybe", "yes please", "ja", "1.0", "-1"]
VALUES = WORDS + [True, False, 0, 1, 2, -1, 0.0, 1.0, 0.5, None, [], [1], {}, b"yes", b"no"]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_boolean_reads_as_ansible_core_does(value):
    try:
        want = ansible_boolean(value, strict=True)
    except TypeError:
        want = None
    assert parse_bool(value) == want
    if want is None:
        with pytest.raises(ValueError, match="not a boolean"):
            boolean(value)
    else:
        assert boolean(value) is want
    assert boolean(value, strict=False) is ansible_boolean(value, strict=False)


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_module_flag_is_the_non_strict_rule(value):
    assert flag(value) is ansible_boolean(value, strict=False)


@pytest.mark.parametrize("value", [v for v in VALUES if not isinstance(v, bytes)], ids=repr)
def test_the_bool_filter_keeps_ansible_cores_own_word_set(value, monkeypatch):
    import ansible.plugins.filter.core as core
    monkeypatch.setattr(core.display, "deprecated", lambda *a, **k: None)
    assert FILTERS["bool"](value) is ansible_to_bool(value)


@pytest.mark.parametrize("value, want", [
    ("false", False), ("False", False), (" no ", False), ("n", False), ("f", False), ("0", False),
    ("", False), ("None", False), ("true", True), ("anything", True), ("t", True),
    (0, False), (1, True), (None, False), ([], False), ([0], True)])
def test_a_condition_is_false_for_a_false_word_or_nothing(value, want):
    assert truthy(value) is want
