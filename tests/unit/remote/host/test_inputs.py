"""A payload's on/off argument: the host's copy of the one boolean rule, against ansible-core's
`boolean(strict=False)` (the oracle) and against the controller's rule (the two copies agree)."""
from __future__ import annotations

import pytest
from ansible.module_utils.parsing.convert_bool import boolean as ansible_boolean

from fleetops.engine.module import flag as controller_flag
from fleetops.remote.host.inputs import flag, number

VALUES = ["y", "Y", "yes", " on ", "1", "true", "True", "t", "n", "no", "off", "0", "false", "f", "",
          "none", "2", "maybe", "1.0", True, False, 0, 1, 2, 0.0, 1.0, None, [], [1], b"yes", b"no"]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_payload_flag_reads_as_ansible_core_and_the_controller_do(value):
    assert flag(value) is ansible_boolean(value, strict=False)
    assert flag(value) is controller_flag(value)


def test_a_number_falls_back_to_its_default():
    assert number("3", 1) == 3.0
    assert number("", 1) == 1
    assert number("x", 2, int) == 2
    assert number(None, 5) == 5
