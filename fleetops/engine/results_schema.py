"""The results store's tables, and the steps that bring an older store up to this version.

One definition serves both backends (results_backend translates it for PostgreSQL); a store
newer than this fleetops is refused rather than written to.
"""
from __future__ import annotations

SCHEMA_VERSION = 2

SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    started REAL NOT NULL,
    ended REAL,
    status TEXT NOT NULL CHECK (status IN ('running','ok','failed','unreachable','interrupted')),
    exit_code INTEGER,
    playbook TEXT,
    inventory TEXT,
    options TEXT,
    controller_user TEXT,
    controller_host TEXT,
    controller_pid INTEGER,
    controller_pid_start TEXT,
    fleetops_version TEXT,
    stats TEXT
);
CREATE TABLE IF NOT EXISTS run_hosts (
    run_id TEXT NOT NULL REFERENCES runs(id),
    host TEXT NOT NULL,
    ok INTEGER NOT NULL DEFAULT 0,
    changed INTEGER NOT NULL DEFAULT 0,
    unreachable INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,
    rescued INTEGER NOT NULL DEFAULT 0,
    ignored INTEGER NOT NULL DEFAULT 0,
    facts TEXT,
    first_seen REAL,
    last_seen REAL,
    PRIMARY KEY (run_id, host)
);
CREATE TABLE IF NOT EXISTS task_results (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    host TEXT NOT NULL,
    play_index INTEGER NOT NULL,
    task_index INTEGER NOT NULL,
    task_name TEXT,
    module TEXT,
    status TEXT NOT NULL CHECK (status IN ('ok','changed','failed','unreachable','skipped','rescued','ignored')),
    msg TEXT,
    started REAL,
    ended REAL,
    duration REAL,
    result TEXT
);
CREATE INDEX IF NOT EXISTS task_results_run ON task_results(run_id, play_index, task_index, host);
CREATE INDEX IF NOT EXISTS runs_started ON runs(started);
CREATE TABLE IF NOT EXISTS plays (
    run_id TEXT NOT NULL REFERENCES runs(id),
    play_index INTEGER NOT NULL,
    name TEXT,
    hosts TEXT,
    started REAL,
    ended REAL,
    stopped_reason TEXT,
    PRIMARY KEY (run_id, play_index)
);
CREATE TABLE IF NOT EXISTS batches (
    run_id TEXT NOT NULL REFERENCES runs(id),
    play_index INTEGER NOT NULL,
    batch_index INTEGER NOT NULL,
    hosts TEXT,
    started REAL,
    PRIMARY KEY (run_id, play_index, batch_index)
);
"""
# version -> statements that bring a store of the version before it up to that version
MIGRATIONS = {
    2: ["CREATE INDEX IF NOT EXISTS runs_started ON runs(started)"],
}
