"""ansible-core's own integration targets (tests/support/ansible_targets.py), run with
ansible-playbook and with fleetops as ansible-test runs them.

The default selection is the listed targets fleetops passes (each fails on a fleetops without
the feature it exercises); the whole list (tests/data/ansible_targets/targets.txt) runs under
`-m slow`, or faster by hand with scripts/ansible_targets.py, which prints the table.
"""
from __future__ import annotations

import pytest

from tests.support import ansible_targets, oracle

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

# listed targets that pass with both tools: each must keep passing with fleetops
PASSING = ("ignore_errors", "undefined", "filter_urlsplit", "test_mathstuff", "lookup_file", "lookup_nested",
           "lookup_sequence", "lookup_subelements")


def test_the_sdist_is_the_pinned_one_and_its_licence_is_kept():
    integ = ansible_targets.integration_dir()
    assert (integ.parent / "COPYING").read_text().startswith("                    GNU GENERAL PUBLIC LICENSE")
    assert set(ansible_targets.listed()) <= {p.name for p in (integ / "targets").iterdir()}
    assert set(PASSING) <= set(ansible_targets.listed())


@pytest.mark.parametrize("name", PASSING)
def test_target_passes_as_with_ansible_playbook(name):
    got = ansible_targets.compare([name])
    ansible, fleetops = got[name]
    assert ansible.passed, ansible.reason
    assert fleetops.passed and not fleetops.traceback, fleetops.reason


@pytest.mark.slow
def test_every_listed_target_ends_without_a_traceback():
    results = ansible_targets.compare(ansible_targets.listed(), jobs=2)
    print(ansible_targets.table(results))
    assert not [n for n, (_, f) in results.items() if f.traceback], ansible_targets.table(results)
