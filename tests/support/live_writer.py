"""A live Hermes writer for audit tests: hermes-agent's own SessionDB appending conversations to a
store until a stop file appears, run under a Hermes venv's python (tests/corpus/build.venv_python).

    python live_writer.py DB STOP_FILE COUNT_FILE persistent|per_turn

`persistent`: one SessionDB for the whole run, as a gateway holds it (PASSIVE checkpoints every
50 writes). `per_turn`: a SessionDB opened and closed per conversation turn, as cron jobs and CLI
runs do: its close() checkpoints with TRUNCATE and, as the last connection, SQLite deletes the
-wal and -shm, so the store is often a bare WAL-mode file between turns. COUNT_FILE holds the
number of committed messages so far (a test can tell that writes happened during its audits).
"""
import os
import sys
import time
import uuid
from pathlib import Path


def main(db, stop, count_file, style):
    import hermes_state
    n = 0
    db_obj = hermes_state.SessionDB(db_path=Path(db)) if style == "persistent" else None
    while not os.path.exists(stop):
        s = db_obj or hermes_state.SessionDB(db_path=Path(db))
        sid = "live_%s" % uuid.uuid4().hex[:12]
        s.create_session(sid, "cli", model="test-model", system_prompt="You are Hermes.")
        for i in range(4):
            s.append_message(sid, "user" if i % 2 == 0 else "assistant",
                             content="turn %d of %s: %s" % (i, sid, "lorem ipsum " * (5 + 40 * (i % 3))),
                             timestamp=time.time())
            n += 1
        s.end_session(sid, "user_exit")
        if db_obj is None:
            s.close()
        with open(count_file + ".tmp", "w") as f:
            f.write(str(n))
        os.replace(count_file + ".tmp", count_file)
    if db_obj is not None:
        db_obj.close()


if __name__ == "__main__":
    main(*sys.argv[1:5])
