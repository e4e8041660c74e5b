"""Bounded, seeded fuzz: random page overwrites, zeroed pages and bit flips on a small real
store (real SessionDB, deleted sessions still on free pages), salvaged through the CLI entry.

For every trial: the source is unchanged; the exit code is 0 or 2; the output passes
integrity_check and foreign_key_check; and against ground truth no row is invented (a key the
store never had), none resurrected (a deleted row), none altered unless the report names it
(suspect content, invalid UTF-8, or a documented repair). About a minute in all.
"""
import hashlib
import json
import os
import random
import shutil
import sqlite3

import pytest

from fleetops.hermes import salvage_cli
from fleetops.remote.sqlite.fileformat.record import text_or_invalid
from tests.corpus import build, damage, truth

TRIALS = int(os.environ.get("FLEETOPS_FUZZ_TRIALS", "48"))
SMALL = dict(sessions=10, messages_per_session=(12, 40), seed=11, deleted=2)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    try:
        build.venv_python()
    except build.HermesVenvMissing as exc:
        pytest.skip("fuzz needs the hermes venv: %s" % exc)
    base = tmp_path_factory.mktemp("fuzz")
    p = base / "base" / "state.db"
    build.realistic_db(p, **SMALL)
    ref = base / "ref" / "state.db"
    build.with_deleted_run(p, ref, run=3)
    gt = truth.ground_truth(ref)
    deleted = damage.deleted_on_freelist_rows(ref, gt)
    assert deleted["messages"], "the fuzz store must keep deleted rows on free pages"
    return ref, gt, deleted


def _damage(path, rng):
    """1 to 4 random hits: a page of random bytes, a zeroed page, or 1..8 flipped bits."""
    size = os.path.getsize(path)
    ps = 4096
    pages = size // ps
    what = []
    with open(path, "r+b") as fh:
        for _ in range(rng.randint(1, 4)):
            k = rng.random()
            if k < 0.35:
                pg = rng.randint(1, pages)
                fh.seek((pg - 1) * ps)
                fh.write(bytes(rng.getrandbits(8) for _ in range(ps)))
                what.append("page %d random" % pg)
            elif k < 0.5:
                pg = rng.randint(1, pages)
                fh.seek((pg - 1) * ps)
                fh.write(bytes(ps))
                what.append("page %d zeroed" % pg)
            else:
                for _ in range(rng.randint(1, 8)):
                    off = rng.randrange(size)
                    fh.seek(off)
                    b = fh.read(1)[0]
                    fh.seek(off)
                    fh.write(bytes([b ^ (1 << rng.randrange(8))]))
                    what.append("bit flip at %d" % off)
    return what


def _sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def test_fuzz(small, tmp_path, capsys):
    ref, gt, deleted = small
    failures = []
    for trial in range(TRIALS):
        rng = random.Random(1000 + trial)
        work = tmp_path / ("t%d" % trial)
        src = work / "state.db"
        build.copy_image(ref, src)
        what = _damage(str(src), rng)
        before = _sha(src)
        out = work / "out" / "state.db"
        out.parent.mkdir()
        rc = salvage_cli.salvage({"source": str(src), "output": str(out), "json": True,
                                  "fts": "rebuild" if trial % 8 == 0 else "leave-to-hermes"})
        printed = capsys.readouterr().out
        problems = []
        if _sha(src) != before:
            problems.append("source changed")
        if rc not in (0, 2):
            problems.append("exit %d: %s" % (rc, printed[-300:]))
        if os.path.exists(str(out) + ".salvage-tmp"):
            problems.append("temporary output left")
        if os.path.exists(out):
            rep = json.loads(printed)
            problems += _check_output(out, rep, gt, deleted)
        elif rc == 2 and '"failed"' not in printed:
            problems.append("exit 2 without an output")
        if problems:
            failures.append((trial, what, problems[:6]))
        shutil.rmtree(work)
    assert not failures, "\n".join("trial %d %s: %s" % f for f in failures)


def _check_output(out, rep, gt, deleted):
    problems = []
    c = sqlite3.connect(out)
    c.text_factory = text_or_invalid
    try:
        ic = c.execute("PRAGMA integrity_check").fetchall()
        if ic != [("ok",)]:
            problems.append("integrity_check: %s" % ic[:3])
        fk = c.execute("PRAGMA foreign_key_check").fetchall()
        if fk:
            problems.append("foreign_key_check: %s" % fk[:3])
        for t, info in gt["tables"].items():
            try:
                got = dict((r[0], r[1:]) for r in c.execute('SELECT rowid, * FROM "%s" NOT INDEXED' % t))
            except sqlite3.Error:
                continue        # table not salvaged (its DDL lost): a loss, reported
            x = rep["tables"].get(t, {})
            named = set(x.get("suspect_rows", {})) | set(map(str, x.get("invalid_utf8_rows", [])))
            repaired = dict((r["rowid"], r["column"]) for r in x.get("repairs", []))
            cols = info["columns"]
            for rid, vals in got.items():
                if rid in deleted.get(t, ()):
                    problems.append("%s %d resurrected" % (t, rid))
                elif rid not in info["rows"]:
                    problems.append("%s %d invented" % (t, rid))
                elif str(rid) in named:
                    continue
                else:
                    want = list(info["rows"][rid])
                    got_v = list(vals)
                    for col in str(repaired.get(rid, "")).split(","):
                        if col in cols:
                            want[cols.index(col)] = got_v[cols.index(col)]
                    if got_v != want:
                        diff = [cols[i] for i in range(len(cols)) if got_v[i] != want[i]]
                        problems.append("%s %d altered (%s)" % (t, rid, ", ".join(diff)))
    finally:
        c.close()
    return problems
