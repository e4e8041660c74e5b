"""Issue 8: a state.db that is a symlink to a path outside the Hermes home is refused by every
repair step (nothing touched there) unless allow_symlink is given."""
import hashlib
import os
import sqlite3

from fleetops.remote.hermes import snapshot as hermes_snapshot
from fleetops.remote.hermes import quarantine as hermes_quarantine


def _sha(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


def test_state_db_symlinked_outside_the_home_is_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    real = outside / "state.db"
    with sqlite3.connect(real) as c:
        c.execute("CREATE TABLE state_meta(key PRIMARY KEY, value)")
        c.execute("INSERT INTO state_meta VALUES ('a', 'b')")
    home = tmp_path / "hermes"
    home.mkdir()
    os.symlink(real, home / "state.db")
    before = (_sha(real), sorted(os.listdir(outside)), sorted(os.listdir(home)))

    for step, extra in ((hermes_snapshot, {}), (hermes_quarantine, {"action": "quarantine"})):
        res = step.main(dict({"hermes_home": str(home)}, **extra))
        assert res["failed"] and "symlink" in res["msg"] and str(real) in res["msg"], res
        assert "allow_symlink" in res["msg"]
    assert (_sha(real), sorted(os.listdir(outside)), sorted(os.listdir(home))) == before

    ok = hermes_snapshot.main({"hermes_home": str(home), "allow_symlink": True, "min_free_factor": 0})
    assert not ok["failed"], ok
    assert _sha(real) == before[0]


def test_symlink_inside_the_home_is_fine(tmp_path):
    home = tmp_path / "hermes"
    (home / "data").mkdir(parents=True)
    real = home / "data" / "state.db"
    with sqlite3.connect(real) as c:
        c.execute("CREATE TABLE state_meta(key PRIMARY KEY, value)")
    os.symlink(real, home / "state.db")
    res = hermes_snapshot.main({"hermes_home": str(home), "min_free_factor": 0})
    assert not res["failed"], res
