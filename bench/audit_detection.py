#!/usr/bin/env python3
"""How often the audit notices one flipped bit inside an FTS index, on this host's SQLite.

Bit rot inside an FTS5 leaf leaves every b-tree intact, so only a check that reads the index's
contents can see it: FTS5's own integrity check (inside quick_check from SQLite 3.44 on) or,
below that, the audit's fts5vocab walk. Each trial copies the suite's standard store, flips one
random bit at a random place inside one random *_data block (a seeded choice, so every run and
every SQLite meets the same flips) and audits the copy. Run it under each interpreter whose
SQLite matters, e.g. the machine's and a Debian 13 root's:

    python3 bench/audit_detection.py --trials 30
    chroot ROOT python3 CHECKOUT/bench/audit_detection.py --trials 30   (the checkout bound inside ROOT)

It prints, per trial, the table, the verdict and the first evidence, then "detected k of n".
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from fleetops.remote.hermes import audit as hermes_audit  # noqa: E402
from fleetops.remote.hermes import audit_fts  # noqa: E402

SOURCE = os.path.join(tempfile.gettempdir(), "fleetops-bench-detection", "src", "state.db")


def source() -> str:
    """The suite's standard store (hermes-agent 0.19.0's own SessionDB), built once."""
    if not os.path.exists(SOURCE):
        from tests.corpus import build
        os.makedirs(os.path.dirname(SOURCE), exist_ok=True)
        build.standard_db(SOURCE + ".tmp")
        os.rename(SOURCE + ".tmp", SOURCE)
    return SOURCE


def flip(src: str, out: str, trial: int) -> str:
    """Copy `src` to `out` with one bit flipped inside one FTS *_data block; the table's name."""
    rng = random.Random(trial)
    con = sqlite3.connect("file:%s?mode=ro" % src, uri=True)
    try:
        table = rng.choice(["messages_fts_trigram_data", "messages_fts_data"])
        ids = [r[0] for r in con.execute("SELECT id FROM %s WHERE id > 10 AND length(block) > 200" % table)]
        block = con.execute("SELECT block FROM %s WHERE id = ?" % table, (rng.choice(ids),)).fetchone()[0]
    finally:
        con.close()
    with open(src, "rb") as f:
        data = bytearray(f.read())
    for _ in range(100):                       # a 32-byte window of the block found once in the file
        off = rng.randrange(4, len(block) - 40)
        at = data.find(block[off:off + 32])
        if at >= 0 and data.find(block[off:off + 32], at + 1) < 0:
            break
    else:
        raise SystemExit("trial %d: no window of the block is unique in the file" % trial)
    data[at] ^= 1 << rng.randrange(8)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "wb") as f:
        f.write(bytes(data))
    return table


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=30)
    args = ap.parse_args()
    src = source()
    covers = audit_fts.quick_check_covers_fts5()
    print("python %s, SQLite %s: quick_check %s FTS5's own integrity check"
          % (sys.version.split()[0], sqlite3.sqlite_version, "runs" if covers else "does not run"))
    work = tempfile.mkdtemp(prefix="fleetops-detection-")
    found = 0
    try:
        for t in range(args.trials):
            out = os.path.join(work, str(t), "state.db")
            table = flip(src, out, t)
            rec = hermes_audit.main({"db_path": out, "holders": False, "tooling": False})["databases"][0]
            evidence = (rec["reasons"] or ["-"])[0]
            found += rec["verdict"] != "healthy"
            print("%3d %-26s %-18s %s" % (t, table, rec["verdict"], evidence[:90]))
            shutil.rmtree(os.path.dirname(out))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("detected %d of %d single-bit flips inside FTS blocks (SQLite %s)" % (found, args.trials, sqlite3.sqlite_version))
    return 0


if __name__ == "__main__":
    sys.exit(main())
