"""The SQLite file format, read by a reader that never trusts the file.

Why: salvage must read pages SQLite itself refuses (under a damaged interior
page, orphaned, referenced twice) on hosts whose sqlite3 lacks .recover, and the
audit reads the same structures. Stdlib only, Python 3.8+. Every decoding error is
an errors.FormatError, never an IndexError or struct.error, so callers can skip one
bad page or cell and go on. Callers import each name from the module that holds it:
record (varints, records), header, btree (page and cell shapes), reader (SQLiteFile),
wal (committed frames).
"""
