"""SQLite on the host: a file-format reader that never trusts the file, salvage, the lock-byte fence."""
