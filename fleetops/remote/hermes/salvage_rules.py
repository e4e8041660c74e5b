"""Hermes' rules for salvaging its state.db: values for the NOT NULL columns a damaged row lost,
and the shipped schema of the Hermes version that made a store whose schema page is lost.
Passed to salvage (fleetops.remote.sqlite.salvage) by every Hermes caller; stdlib only."""
import sqlite3

from fleetops.remote.hermes import schemas as hermes_schemas
from fleetops.remote.sqlite.fileformat.errors import FormatError
from fleetops.remote.sqlite.salvage.rules import LostSchema, Rules
from fleetops.remote.sqlite.salvage.sqlutil import one_row


def _repair_sessions_started_at(out, row):
    """sessions.started_at NULL -> the session's first message timestamp,
    else the smallest started_at of its neighbouring sessions (by rowid)."""
    rowid, vals, cols = row
    sid = vals[cols.index("id")] if "id" in cols else None
    if sid is not None:
        try:
            v = one_row(out, "SELECT min(timestamp) FROM messages WHERE session_id = ?",
                     (sid,))[0]
            if v is not None:
                return v, "first message timestamp of the session"
        except sqlite3.Error:
            pass
    cands = []
    for op, order in (("<", "DESC"), (">", "ASC")):
        r = one_row(out, "SELECT started_at FROM sessions WHERE rowid %s ? AND started_at IS NOT NULL "
                      "ORDER BY rowid %s LIMIT 1" % (op, order), (rowid,))
        if r:
            cands.append(r[0])
    if cands:
        return min(cands), "minimum started_at of the neighbouring sessions"
    return None, None


def _repair_messages_timestamp(out, row):
    """messages.timestamp NULL -> the previous message's timestamp in the same session,
    else the next one's, else the session's started_at."""
    rowid, vals, cols = row
    sid = vals[cols.index("session_id")] if "session_id" in cols else None
    if sid is None:
        return None, None
    for op, order, why in (("<", "DESC", "previous message timestamp in the session"),
                           (">", "ASC", "next message timestamp in the session")):
        r = one_row(out, "SELECT timestamp FROM messages WHERE session_id = ? AND id %s ? AND "
                      "timestamp IS NOT NULL ORDER BY id %s LIMIT 1" % (op, order),
                 (sid, rowid))
        if r:
            return r[0], why
    try:
        r = one_row(out, "SELECT started_at FROM sessions WHERE id = ?", (sid,))
        if r and r[0] is not None:
            return r[0], "started_at of the session"
    except sqlite3.Error:
        pass
    return None, None


def lost_schema(rows, reader):
    """(LostSchema, how) of the Hermes version that made the store, told by its schema_version
    table when the page reader can still read it, else by the surviving DDL; (None, why)."""
    version = None
    sv = [r for r in rows if r["name"] == "schema_version" and r.get("rootpage")]
    if sv:
        try:
            w = reader.walk_btree(sv[0]["rootpage"])
            vals = [v for pg in w.leaves for _c, v in reader.leaf_records(pg) if v]
            if len(vals) == 1 and len(vals[0]) == 1 and isinstance(vals[0][0], int):
                version = vals[0][0]
        except FormatError:
            pass
    module, how = hermes_schemas.identify(rows, version)
    if module is None:
        return None, how
    return LostSchema(module.OBJECTS, {"hermes_version": module.HERMES_VERSION,
                                       "schema_version": module.SCHEMA_VERSION},
                      "Hermes %s" % module.HERMES_VERSION), how


RULES = Rules(
    repairs={("sessions", "started_at"): _repair_sessions_started_at,
             ("messages", "timestamp"): _repair_messages_timestamp},
    repair_order=["sessions", "messages"],
    lost_schema=lost_schema,
    recognised_as="Hermes version fleetops ships")
