"""A process that keeps a SQLite database open (db, -wal, -shm) until killed: a stand-in holder.

Run with `exec -a "hermes serve --isolated" python3 holder.py DB` it looks like the desktop
backend in /proc/PID/cmdline; a real SQLite connection holds the files exactly as Hermes does.
"""
import signal
import sqlite3
import sys
import time

conn = sqlite3.connect(sys.argv[1], timeout=5)
conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    time.sleep(3600)
