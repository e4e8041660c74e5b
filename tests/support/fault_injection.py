"""Fault injection for the tests, kept out of the product: a payload that dies between the swap's
renames, and test-only payloads (tests/payloads/), reach a real `fleetops` run through this
wrapper, which patches the payload bundler of its own process only.

    python tests/support/fault_injection.py [--cut-swap-after K] [--payloads DIR] -- FLEETOPS ARGS...
"""
from __future__ import annotations

import os
import runpy
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TEST_PAYLOADS = os.path.join(os.path.dirname(HERE), "payloads")
SWAP_INTERRUPT_EXIT = 75   # what the cut payload exits with: no result, as if killed


def swap_cut_source(k: int) -> str:
    """Python appended to hermes/swap_journal's source: its journalled steps (renames, links) stop dead (os._exit) after
    the k-th (k=0: after the journal is written, before the first), as a power cut would."""
    return f'''

_fi_real_run_journal = run_journal
_fi_real_do = do


def run_journal(loc, j):
    done = [0]

    def cut(m, moves):
        if {k} == 0:
            os._exit({SWAP_INTERRUPT_EXIT})
        _fi_real_do(m, moves)
        done[0] += 1
        if done[0] == {k}:
            os._exit({SWAP_INTERRUPT_EXIT})
    globals()["do"] = cut
    try:
        return _fi_real_run_journal(loc, j)
    finally:
        globals()["do"] = _fi_real_do
'''


def _merged_remote(extra_dir: str) -> str:
    """A folder with every product payload and the test payloads, linked, for the bundler."""
    import fleetops.engine.payload as payload
    out = tempfile.mkdtemp(prefix="fleetops-test-payloads-")
    for d in (payload.REMOTE_DIR, extra_dir):
        for name in os.listdir(d):
            is_pkg = os.path.isfile(os.path.join(d, name, "__init__.py"))
            if (name.endswith(".py") or is_pkg) and not os.path.exists(os.path.join(out, name)):
                os.symlink(os.path.join(d, name), os.path.join(out, name))
    return out


def main(argv: list) -> None:
    cut, extra = None, None
    while argv and argv[0] != "--":
        opt = argv.pop(0)
        if opt == "--cut-swap-after":
            cut = int(argv.pop(0))
        elif opt == "--payloads":
            extra = argv.pop(0)
        else:
            raise SystemExit(f"fault_injection: unknown option {opt}")
    argv = argv[1:]
    import fleetops.engine.payload as payload
    import fleetops.modules.python as python_module
    real = payload.bundle_sources
    root = _merged_remote(extra) if extra else payload.REMOTE_DIR
    python_module.REMOTE_DIR = root

    def bundle(module, _root=None):
        mods = real(module, root)
        if cut is not None and module in ("hermes_quarantine", "hermes_swap", "hermes_rollback"):
            mods = dict(mods)
            mods["fleetops.remote.hermes.swap_journal"] += swap_cut_source(cut)
        return mods
    payload.bundle_sources = bundle
    sys.argv = ["fleetops", *argv]
    runpy.run_module("fleetops", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
