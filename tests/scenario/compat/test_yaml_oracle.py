"""YAML merge keys (`<<:`) read by fleetops and by ansible-core 2.19's own loader (the oracle).

Playbooks, vars files and inventories share one loader; which value a merge gives and the
order of the keys it makes (the order of a group's hosts, of a dict a task prints) must be
ansible-core's: its loader is PyYAML's flatten_mapping.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fleetops.engine.yamlsrc import load_yaml_text
from tests.support import oracle

pytestmark = pytest.mark.skipif(not oracle.available(),
                                reason="ansible-core missing: scripts/setup.sh installs the [test] extra")

ORACLE = """
import json, sys
from ansible.parsing.yaml.loader import AnsibleLoader
out = []
for text in json.load(sys.stdin):
    out.append(AnsibleLoader(text).get_single_data())
json.dump(out, sys.stdout)
"""

DOCUMENTS = [
    # the mapping's own key overrides a merged one and keeps the merged key's place
    "base: &b {k: 1, j: 2}\nx:\n  <<: *b\n  k: 5\n",
    # a list of sources: the first one wins, the last one's keys come first
    "a: &a {h2: 1, h1: a}\nb: &b {h3: 2, h1: b}\nweb:\n  <<: [*a, *b]\n  h0: 0\n  h2: own\n",
    # two `<<:` keys in one mapping: the later one wins
    "a: &a {k: a, only_a: 1}\nb: &b {k: b, only_b: 1}\nx:\n  <<: *a\n  z: 0\n  <<: *b\n",
    # merges of merges
    "a: &a {k: 1, m: 1}\nb: &b\n  <<: *a\n  m: 2\n  n: 2\nx:\n  <<: *b\n  n: 3\n",
    # an inventory whose group hosts come from anchors
    "all:\n  vars:\n    common: &common {h2: null, h1: null}\n    more: &more {h3: null, h1: {x: 1}}\n"
    "  children:\n    web:\n      hosts:\n        <<: [*common, *more]\n        h0:\n        h2: {y: 2}\n",
]


def test_merge_keys_match_ansible_core():
    p = subprocess.run([sys.executable, "-c", ORACLE], input=json.dumps(DOCUMENTS), capture_output=True,
                       text=True, timeout=120, env=oracle._env("/nonexistent"))
    assert p.returncode == 0, p.stderr
    expected = json.loads(p.stdout)
    for text, want in zip(DOCUMENTS, expected):
        got = load_yaml_text(text, "doc.yml")
        # json.dumps keeps each mapping's key order: the order is compared, not only the values
        assert json.dumps(got) == json.dumps(want), text
