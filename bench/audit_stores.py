"""Big realistic Hermes stores for bench/audit_cost.py, written by the real SessionDB and kept.

Why here and not in the corpus cache: a 3 GB store takes the better part of an hour to write,
so it is built once into a directory the operator names (never the repo), published by an
atomic rename, and reused by every later run. The 0.3 GB size is the suite's own BIG store
(tests/corpus/build.py), so its figures are the ones the suite's store gives.

    python3 bench/audit_stores.py --store-dir /var/tmp/fleetops-bench-audit --sizes 0.3,1,3
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tests.corpus import build  # noqa: E402

# Sessions per GB of the BIG preset's mix (400 sessions make ~282 MB).
SESSIONS_PER_GB = 1420
DEFAULT_DIR = "/var/tmp/fleetops-bench-audit"


def label(size_gb: float) -> str:
    return ("%g" % size_gb) + "gb"


def store(store_dir: str, size_gb: float) -> str:
    """The state.db of about `size_gb` GB under `store_dir`, built first if absent."""
    final = os.path.join(store_dir, label(size_gb))
    db = os.path.join(final, "state.db")
    if os.path.exists(os.path.join(final, "meta.json")):
        return db
    os.makedirs(store_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="build-%s-" % label(size_gb), dir=store_dir)
    try:
        t0 = time.monotonic()
        work = os.path.join(tmp, "image", "state.db")
        os.makedirs(os.path.dirname(work))
        if abs(size_gb - 0.3) < 1e-9:
            meta = build.realistic_db(work, big=True)          # the suite's BIG store, as the suite builds it
        else:
            params = dict(build.BIG, messages_per_session=list(build.BIG["messages_per_session"]),
                          sessions=int(round(SESSIONS_PER_GB * size_gb)), titles=True, tool_calls=True,
                          mode="build", path=work)
            meta = build._run_gen(params, os.path.dirname(work))
            meta.pop("sessions", None)
            meta.pop("deleted_message_ids", None)
            meta["params"] = {k: v for k, v in params.items() if k not in ("mode", "path")}
        meta["bench_build_seconds"] = round(time.monotonic() - t0, 1)
        meta["size_bytes"] = os.path.getsize(work)
        with open(os.path.join(tmp, "image", "meta.json"), "w") as f:
            json.dump(meta, f, indent=1, default=str)
        os.rename(os.path.join(tmp, "image"), final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return db


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store-dir", default=DEFAULT_DIR)
    ap.add_argument("--sizes", default="0.3,1,3")
    a = ap.parse_args()
    for s in a.sizes.split(","):
        db = store(a.store_dir, float(s))
        print("%s %d bytes" % (db, os.path.getsize(db)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
