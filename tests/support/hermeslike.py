"""A Hermes-like state.db built with stdlib sqlite3, plus byte-level damage helpers.

Why: the salvage tests need real SQLite files with known ground truth. Ground truth for
"which rows sit on which leaf page" comes from SQLite's own dbstat table (page paths in
key order) and table scans, never from the reader under test.
"""
import random
import sqlite3

SCHEMA = [
    "CREATE TABLE schema_version (version INTEGER NOT NULL)",
    "CREATE TABLE state_meta (key TEXT PRIMARY KEY, value TEXT)",
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY, source TEXT NOT NULL, user_id TEXT, model TEXT,
        model_config TEXT, system_prompt TEXT, parent_session_id TEXT,
        started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
        message_count INTEGER DEFAULT 0, tool_call_count INTEGER DEFAULT 0,
        input_tokens INTEGER DEFAULT 0, output_tokens INTEGER DEFAULT 0,
        title TEXT, cwd TEXT, estimated_cost_usd REAL,
        FOREIGN KEY (parent_session_id) REFERENCES sessions(id))""",
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL REFERENCES sessions(id),
        role TEXT NOT NULL, content TEXT, tool_call_id TEXT, tool_calls TEXT,
        tool_name TEXT, timestamp REAL NOT NULL, token_count INTEGER, finish_reason TEXT)""",
    "CREATE INDEX idx_sessions_source ON sessions(source)",
    "CREATE INDEX idx_sessions_parent ON sessions(parent_session_id)",
    "CREATE INDEX idx_messages_session ON messages(session_id, timestamp)",
    "CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL",
    "CREATE VIRTUAL TABLE messages_fts USING fts5(content)",
    "CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, tokenize='trigram')",
]
for _fts in ("messages_fts", "messages_fts_trigram"):
    SCHEMA += [
        "CREATE TRIGGER %s_insert AFTER INSERT ON messages BEGIN "
        "INSERT INTO %s(rowid, content) VALUES (new.id, new.content); END" % (_fts, _fts),
        "CREATE TRIGGER %s_delete AFTER DELETE ON messages BEGIN "
        "DELETE FROM %s WHERE rowid = old.id; END" % (_fts, _fts),
        "CREATE TRIGGER %s_update AFTER UPDATE OF content ON messages BEGIN "
        "DELETE FROM %s WHERE rowid = old.id; "
        "INSERT INTO %s(rowid, content) VALUES (new.id, new.content); END" % (_fts, _fts, _fts),
    ]

WORDS = ("gateway session restart config volume container backup snapshot cron token model "
         "prompt query index page cache disk kernel sensor deploy rollback schema café 日本語 "
         "Zürich 🚀").split()


def text(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def build(path, sessions=40, msgs=(4, 14), seed=1, big_every=9, deleted=0, titles=True):
    """Create the file; returns {"deleted_sessions": [...], "deleted_message_ids": [...]}."""
    rng = random.Random(seed)
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA secure_delete=OFF")
    c.execute("PRAGMA foreign_keys=ON")
    for s in SCHEMA:
        c.execute(s)
    c.execute("INSERT INTO schema_version VALUES (22)")
    c.executemany("INSERT INTO state_meta VALUES (?, ?)",
                  [("k%d" % i, text(rng, 3)) for i in range(4)])
    t = 1.78e9 + seed * 1000
    sids = []
    for i in range(sessions):
        t += rng.uniform(100, 5000)
        sid = "%d_%06x" % (int(t), rng.getrandbits(24))
        parent = sids[-1] if sids and rng.random() < 0.1 else None
        c.execute("INSERT INTO sessions(id, source, model, system_prompt, parent_session_id, "
                  "started_at, title, cwd, estimated_cost_usd) VALUES (?,?,?,?,?,?,?,?,?)",
                  (sid, rng.choice(["cli", "cron", "telegram"]), "m/x", text(rng, 30), parent,
                   t, ("Title %d %s" % (i, text(rng, 2))) if titles and rng.random() < 0.8
                   else None, "/home/ops", round(rng.uniform(0, 1), 6)))
        for _j in range(rng.randint(*msgs)):
            t += rng.uniform(1, 60)
            n = 4000 if big_every and rng.randrange(big_every) == 0 else rng.randint(3, 60)
            c.execute("INSERT INTO messages(session_id, role, content, tool_name, timestamp, "
                      "token_count) VALUES (?,?,?,?,?,?)",
                      (sid, rng.choice(["user", "assistant", "tool"]), text(rng, n),
                       rng.choice([None, "terminal"]), t, rng.randint(1, 999)))
        c.execute("UPDATE sessions SET ended_at = ?, message_count = "
                  "(SELECT count(*) FROM messages WHERE session_id = ?) WHERE id = ?",
                  (t + 1, sid, sid))
        sids.append(sid)
    c.commit()
    out = {"deleted_sessions": [], "deleted_message_ids": []}
    if deleted:
        victims = rng.sample(sids[len(sids) // 4:-2], deleted)
        for sid in victims:
            out["deleted_message_ids"] += [r[0] for r in c.execute(
                "SELECT id FROM messages WHERE session_id = ?", (sid,))]
            c.execute("UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id = ?",
                      (sid,))
            c.execute("DELETE FROM messages WHERE session_id = ?", (sid,))
            c.execute("DELETE FROM sessions WHERE id = ?", (sid,))
        c.commit()
        out["deleted_sessions"] = victims
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    return out


def rows(path, table):
    """{rowid: tuple(row)} by a table scan (NOT INDEXED) of a healthy file."""
    c = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        return dict((r[0], tuple(r[1:])) for r in c.execute(
            "SELECT rowid, * FROM %s NOT INDEXED ORDER BY rowid" % table))
    finally:
        c.close()


def btree_pages(path, name):
    """[(pageno, pagetype, ncell, path)] of one b-tree in key order, from SQLite's dbstat."""
    c = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        return sorted(c.execute("SELECT pageno, pagetype, ncell, path FROM dbstat WHERE name = ? "
                                "AND pagetype IN ('internal', 'leaf')", (name,)).fetchall(),
                      key=lambda r: r[3])
    finally:
        c.close()


def leaf_rowids(path, table):
    """[(leaf pageno, [rowids on it])] in key order: dbstat's leaves in path order hold
    the rows of a healthy table in rowid order, ncell at a time."""
    keys = sorted(rows(path, table))
    out, i = [], 0
    for pgno, ptype, ncell, _ in btree_pages(path, table):
        if ptype == "leaf":
            out.append((pgno, keys[i:i + ncell]))
            i += ncell
    assert i == len(keys)
    return out


def interior_pages(path, table):
    return [r[0] for r in btree_pages(path, table) if r[1] == "internal"]


def root_page(path, name):
    c = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        return c.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?", (name,)).fetchone()[0]
    finally:
        c.close()


def page_size(path):
    with open(path, "rb") as fh:
        fh.seek(16)
        v = int.from_bytes(fh.read(2), "big")
    return 65536 if v == 1 else v


def read_page(path, pgno):
    ps = page_size(path)
    with open(path, "rb") as fh:
        fh.seek((pgno - 1) * ps)
        return fh.read(ps)


def write_page(path, pgno, data):
    ps = page_size(path)
    assert len(data) == ps
    with open(path, "r+b") as fh:
        fh.seek((pgno - 1) * ps)
        fh.write(data)


def patch(path, offset, data):
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def garbage(pgno, size, seed=0):
    """Bytes that are not a b-tree page (first byte forced to an invalid page type)."""
    rng = random.Random(seed * 7919 + pgno)
    b = bytearray(rng.getrandbits(8) for _ in range(size))
    b[0] = 0x77
    return bytes(b)
