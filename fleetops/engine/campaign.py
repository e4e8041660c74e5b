"""One rollout over several controllers (shards), coordinated through the PostgreSQL results store.

Every shard reads the same inventory and playbook, so each computes the same fleet-wide
`serial` batches of a play; it runs the hosts of each batch that it owns (engine/shards.py)
and the batches go in step across the fleet: after its part of batch B, a shard records its
hosts' outcomes and a marker in one transaction, waits until every shard has marked B, then
takes the verdict on the whole batch (max_fail_percentage, a batch where every host failed,
and the campaign's absolute failure budget). The first shard to reach a stop writes the reason
under the campaign's advisory lock; every shard reads it and stops before its next batch. So
the canary (the first batch, wherever its host lives) runs first and the others wait for it.

A play starts when every shard has finished the one before (Ansible's linear order, fleet-wide);
hosts that failed in an earlier play, on any shard, are out of the later plays. A shard holds
a session advisory lock on its index for as long as it runs, so two copies of one shard never
run at once; restarted with the same index, it skips the hosts the campaign already has an
outcome for. A host is marked started before its batch runs: one that a killed run left started
is recorded `interrupted` (its state is unknown, so it counts as failed) and never run again by
the campaign. Nothing but PostgreSQL is shared: no server of our own.
"""
from __future__ import annotations

import hashlib
import random
import sys
import time

from fleetops.engine.batches import batch_abort, split_batches
from fleetops.engine.events import EventSink
from fleetops.engine.results_backend import PgConnection
from fleetops.engine.shards import Shard, owner
from fleetops.errors import BadInput

SCHEMA = """
CREATE TABLE IF NOT EXISTS campaigns (
    id TEXT PRIMARY KEY,
    shards INTEGER NOT NULL,
    max_failures INTEGER,
    count_unreachable INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    stopped_reason TEXT
);
CREATE TABLE IF NOT EXISTS campaign_runs (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    run_id TEXT NOT NULL,
    shard INTEGER NOT NULL,
    started REAL NOT NULL,
    PRIMARY KEY (campaign_id, run_id)
);
CREATE TABLE IF NOT EXISTS campaign_hosts (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    play_index INTEGER NOT NULL,
    host TEXT NOT NULL,
    batch_index INTEGER NOT NULL,
    shard INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('started','ok','failed','unreachable','interrupted')),
    run_id TEXT,
    PRIMARY KEY (campaign_id, play_index, host)
);
CREATE TABLE IF NOT EXISTS campaign_batches (
    campaign_id TEXT NOT NULL REFERENCES campaigns(id),
    play_index INTEGER NOT NULL,
    batch_index INTEGER NOT NULL,
    shard INTEGER NOT NULL,
    PRIMARY KEY (campaign_id, play_index, batch_index, shard)
)
"""
PLAY_DONE = -1          # campaign_batches.batch_index of "this shard finished the play"
POLL_SECONDS = 0.2
SAY_EVERY_SECONDS = 30.0
_SCHEMA_KEY = 0x666c656574637031   # serialises creating the campaign tables


def _key(*parts) -> int:
    """A signed 64-bit advisory-lock key for the campaign (and shard) named by `parts`."""
    return int.from_bytes(hashlib.sha256("\0".join(map(str, parts)).encode()).digest()[:8], "big", signed=True)


def _say(msg: str) -> None:
    print(f"fleetops: {msg}", file=sys.stderr, flush=True)


class Campaign(EventSink):
    """The batch hook (plan/before/after/finish, as batches.LocalBatches) of shard `shard`
    of campaign `campaign_id`, and an event listener that records which runs belong to it."""

    def __init__(self, db_url: str, campaign_id: str, shard: Shard, max_failures: int | None = None,
                 count_unreachable: bool = False, say=_say, poll: float = POLL_SECONDS):
        if not campaign_id or len(campaign_id) > 200 or not campaign_id.isprintable():
            raise BadInput("a campaign id is 1 to 200 printable characters", where="--campaign")
        self.id, self.shard, self.say, self.poll = campaign_id, shard, say, poll
        self.db = PgConnection(db_url)
        self._fleet: dict = {}           # play index -> the fleet's batches
        self._mfp: dict = {}
        self._stopped = lambda: False
        self.run_id: str | None = None
        self.stopped_reason: str | None = None     # why this shard stopped the campaign's rollout, once it has
        self.cut_off: list = []                     # hosts an earlier run of this shard left mid-run
        self._mine: dict = {}                       # play index -> this shard's part of each batch
        self._create_tables()
        self._join(max_failures, count_unreachable)

    # -- joining --

    def _tx(self, fn, *args):
        self.db.execute("BEGIN")
        try:
            out = fn(*args)
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")
        return out

    def _create_tables(self) -> None:
        def create():
            self.db.execute("SELECT pg_advisory_xact_lock(?)", (_SCHEMA_KEY,))
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    self.db.execute(stmt)
        self._tx(create)

    def _join(self, max_failures, count_unreachable) -> None:
        def join():
            self.db.execute("INSERT OR IGNORE INTO campaigns (id, shards, max_failures, count_unreachable, created)"
                            " VALUES (?, ?, ?, ?, ?)", (self.id, self.shard.count, max_failures,
                                                         int(bool(count_unreachable)), time.time()))
            return self.db.execute("SELECT shards, max_failures, count_unreachable FROM campaigns WHERE id=?",
                                   (self.id,)).fetchone()
        shards, budget, unreachable = self._tx(join)
        mine = (self.shard.count, max_failures, int(bool(count_unreachable)))
        if (shards, budget, unreachable) != mine:
            raise BadInput(f"campaign {self.id!r} runs with {shards} shards, --max-failures {budget}, "
                           f"--count-unreachable {'on' if unreachable else 'off'}; this shard was started with "
                           f"{mine[0]} shards, --max-failures {mine[1]}, --count-unreachable "
                           f"{'on' if mine[2] else 'off'}: start every shard alike", where="--campaign")
        self.max_failures, self.count_unreachable = budget, bool(unreachable)
        got = self.db.execute("SELECT pg_try_advisory_lock(?)", (_key(self.id, self.shard.index),)).fetchone()[0]
        if not got:
            raise BadInput(f"shard {self.shard} of campaign {self.id!r} is running on another controller "
                           "(it holds the shard's lock); one copy of a shard runs at a time", where="--shard")

    def run_start(self, run_id, playbook, inventory, options) -> None:
        self.run_id = run_id
        self._tx(lambda: self.db.execute("INSERT OR IGNORE INTO campaign_runs (campaign_id, run_id, shard, started)"
                                         " VALUES (?, ?, ?, ?)", (self.id, run_id, self.shard.index, time.time())))

    def close(self) -> None:
        self.db.close()          # ends the session: the shard's lock goes with it

    # -- what the fleet has done --

    def stop_reason(self) -> str | None:
        row = self.db.execute("SELECT stopped_reason FROM campaigns WHERE id=?", (self.id,)).fetchone()
        return row[0] if row else None

    def _marked(self, play_index: int, batch_index: int) -> set:
        rows = self.db.execute("SELECT shard FROM campaign_batches WHERE campaign_id=? AND play_index=?"
                               " AND batch_index=?", (self.id, play_index, batch_index)).fetchall()
        return {r[0] for r in rows}

    def _wait_for_shards(self, play_index: int, batch_index: int, what: str) -> None:
        """Until every shard marked (play, batch), the campaign stopped, or this run was interrupted."""
        said = 0.0
        while not self._stopped():
            missing = sorted(set(range(self.shard.count)) - self._marked(play_index, batch_index))
            if not missing or self.stop_reason():
                return
            now = time.monotonic()
            if now - said >= SAY_EVERY_SECONDS:
                self.say(f"campaign {self.id}: shard {self.shard} waits for shard(s) "
                         f"{', '.join(map(str, missing))} to finish {what}")
                said = now
            time.sleep(self.poll)

    def _outcomes(self, play_index: int) -> dict:
        """host -> status the campaign recorded in one play."""
        rows = self.db.execute("SELECT host, status FROM campaign_hosts WHERE campaign_id=? AND play_index=?",
                               (self.id, play_index)).fetchall()
        return {r[0]: r[1] for r in rows}

    def _bad(self, below_play: int | None = None) -> dict:
        """host -> status of every host not ok in the campaign (in the plays before `below_play`)."""
        rows = self.db.execute("SELECT host, status FROM campaign_hosts WHERE campaign_id=? AND play_index < ?"
                               " AND status NOT IN ('ok', 'started')",
                               (self.id, 1 << 40 if below_play is None else below_play)).fetchall()
        return {r[0]: r[1] for r in rows}

    def _mark_cut_off(self, play_index: int) -> list:
        """Hosts of this shard that an earlier (dead: the shard's lock says so) run left started."""
        rows = self.db.execute("SELECT host, run_id FROM campaign_hosts WHERE campaign_id=? AND play_index=?"
                               " AND shard=? AND status='started'", (self.id, play_index, self.shard.index)).fetchall()
        for host, _run in rows:
            self.db.execute("UPDATE campaign_hosts SET status='interrupted' WHERE campaign_id=? AND play_index=?"
                            " AND host=?", (self.id, play_index, host))
        return [(r[0], r[1]) for r in rows]

    # -- the batch hook --

    def plan(self, play_index: int, play, hosts: list, stopped) -> list[list]:
        self._stopped = stopped
        if play_index > 0:
            self._wait_for_shards(play_index - 1, PLAY_DONE, f"play {play_index}")
        out_earlier = set(self._bad(play_index))          # failed, unreachable or cut off in an earlier play
        fleet = [h for h in hosts if h not in out_earlier]
        if play.order == "shuffle":                       # one shuffle the whole fleet agrees on
            fleet = random.Random(f"{self.id}\0{play_index}").sample(sorted(fleet), len(fleet))
        batches = split_batches(fleet, play.serial)
        self._fleet[play_index], self._mfp[play_index] = batches, play.max_fail_percentage
        cut = self._tx(self._mark_cut_off, play_index)
        for host, run_id in cut:
            self.say(f"campaign {self.id}: {host} was cut off mid-run by run {run_id} of shard {self.shard}: "
                     f"recorded interrupted and not run again (its state is unknown; look, then run it alone)")
        self.cut_off += [h for h, _r in cut]
        done = set(self._outcomes(play_index))
        if done:
            self.say(f"campaign {self.id}: shard {self.shard} resumes play {play_index + 1}: "
                     f"{len(done)} host(s) already done are skipped")
        self._mine[play_index] = [[h for h in batch if h not in done and owner(h, self.shard.count) == self.shard.index]
                                  for batch in batches]
        return self._mine[play_index]

    def before(self, play_index: int, bindex: int) -> str | None:
        """The campaign's stop, or None after marking this shard's hosts of the batch started."""
        def claim():
            reason = self.stop_reason()
            if reason is None:
                for h in self._mine[play_index][bindex]:
                    self.db.execute("INSERT OR REPLACE INTO campaign_hosts (campaign_id, play_index, host,"
                                    " batch_index, shard, status, run_id) VALUES (?, ?, ?, ?, ?, 'started', ?)",
                                    (self.id, play_index, h, bindex, self.shard.index, self.run_id))
            return reason
        return self._stopped_by(self._tx(claim))

    def _stopped_by(self, reason: str | None) -> str | None:
        if reason:
            self.stopped_reason = f"campaign {self.id} stopped: {reason}"
        return self.stopped_reason if reason else None

    def after(self, play_index: int, bindex: int, batch: list, failed: list, unreachable: list) -> str | None:
        def record():
            for h in batch:
                status = "failed" if h in failed else "unreachable" if h in unreachable else "ok"
                self.db.execute("INSERT OR REPLACE INTO campaign_hosts (campaign_id, play_index, host, batch_index,"
                                " shard, status, run_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                                (self.id, play_index, h, bindex, self.shard.index, status, self.run_id))
            self._mark(play_index, bindex)
        self._tx(record)
        self._wait_for_shards(play_index, bindex, f"batch {bindex + 1} of play {play_index + 1}")
        if self._stopped():
            return None
        return self._tx(self._verdict, play_index, bindex)

    def _mark(self, play_index: int, bindex: int) -> None:
        self.db.execute("INSERT OR IGNORE INTO campaign_batches (campaign_id, play_index, batch_index, shard)"
                        " VALUES (?, ?, ?, ?)", (self.id, play_index, bindex, self.shard.index))

    def _verdict(self, play_index: int, bindex: int) -> str | None:
        """Inside a transaction holding the campaign's lock: the stored reason, or this batch's."""
        self.db.execute("SELECT pg_advisory_xact_lock(?)", (_key(self.id),))
        reason = self.stop_reason()
        if reason is None:
            fleet_batch = self._fleet[play_index][bindex]
            rows = self.db.execute("SELECT host, status FROM campaign_hosts WHERE campaign_id=? AND play_index=?"
                                   " AND batch_index=? AND status <> 'ok'", (self.id, play_index, bindex)).fetchall()
            reason = batch_abort(fleet_batch, [r[0] for r in rows], bindex, self._mfp[play_index])
            if reason:
                reason = f"fleet-wide {reason} (play {play_index + 1})"
            else:
                reason = self._budget_spent(play_index, bindex)
            if reason:
                self.db.execute("UPDATE campaigns SET stopped_reason=? WHERE id=?", (reason, self.id))
        return self._stopped_by(reason)

    def _budget_spent(self, play_index: int, bindex: int) -> str | None:
        """Counted up to this batch only: a faster shard may already have recorded the next one,
        whose hosts the verdict on this batch must not count (its other hosts would never run)."""
        if self.max_failures is None:
            return None
        counted = ("failed", "interrupted", "unreachable") if self.count_unreachable else ("failed", "interrupted")
        rows = self.db.execute("SELECT host, status FROM campaign_hosts WHERE campaign_id=? AND (play_index < ?"
                               " OR (play_index = ? AND batch_index <= ?))",
                               (self.id, play_index, play_index, bindex)).fetchall()
        bad = [h for h, s in rows if s in counted]
        if len(bad) > self.max_failures:
            kind = "failed or unreachable" if self.count_unreachable else "failed"
            return f"failure budget spent: {len(bad)} hosts {kind} across the fleet, --max-failures {self.max_failures}"
        return None

    def finish(self, play_index: int, reason: str | None) -> None:
        """The play ended on this shard: mark every batch of it done (a shard that stopped or ended
        the play early holds no one up); an interrupted run marks nothing, so a restart resumes."""
        if self._stopped() or reason == "interrupted":
            return

        def mark():
            for bindex in range(len(self._fleet.get(play_index, ()))):
                self._mark(play_index, bindex)
            self._mark(play_index, PLAY_DONE)
            if reason and not reason.startswith(f"campaign {self.id} stopped"):
                self.db.execute("UPDATE campaigns SET stopped_reason=? WHERE id=? AND stopped_reason IS NULL",
                                (f"shard {self.shard}: {reason}", self.id))
        self._tx(mark)
