"""Run ansible-core's own integration targets with ansible-playbook and with fleetops, side by side,
and print target -> ansible / fleetops / first reason fleetops failed, with the figure.

    .venv/bin/python scripts/ansible_targets.py [-j N] [TARGET ...]

    .venv/bin/python scripts/ansible_targets.py --ansible-from base.json   # fleetops runs only

Without targets: every target of tests/data/ansible_targets/targets.txt. The sdist of ansible-core
is fetched with pip into $FLEETOPS_TEST_CACHE (default ~/.cache/fleetops-test), sha256 checked.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.support import ansible_targets  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="*")
    ap.add_argument("-j", "--jobs", type=int, default=1, help="targets run at once")
    ap.add_argument("--save", metavar="JSON", help="write both tools' outcomes here")
    ap.add_argument("--ansible-from", metavar="JSON",
                    help="take ansible-playbook's outcomes from an earlier --save instead of running it")
    args = ap.parse_args()
    names = args.targets or ansible_targets.listed()

    def echo(name, a, f):
        print(f"  {name}: ansible {'pass' if a.passed else 'FAIL'}, fleetops "
              f"{'pass' if f.passed else 'FAIL ' + f.reason}", file=sys.stderr, flush=True)
    known = None
    if args.ansible_from:
        known = {n: pair[0] for n, pair in ansible_targets.load(args.ansible_from).items()}
    results = ansible_targets.compare(names, jobs=args.jobs, echo=echo, ansible=known)
    if args.save:
        ansible_targets.save(results, args.save)
    print(ansible_targets.table({n: results[n] for n in names}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
