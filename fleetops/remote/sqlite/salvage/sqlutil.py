"""Small SQL helpers of the salvage stages: quoting, URIs, one-row queries, JSON-safe values.
"""
import base64
import os
import urllib.parse

from fleetops.remote.host.durable import sha256_file
from fleetops.remote.sqlite.fileformat.record import InvalidText


def file_uri(path, **params):
    return "file:" + urllib.parse.quote(os.path.abspath(path)) + "?" + "&".join(
        "%s=%s" % kv for kv in params.items())


def one_row(conn, sql, params=()):
    """First row or None, with the statement finished (an unfinished one blocks checkpoints)."""
    rows = conn.execute(sql, params).fetchall()
    return rows[0] if rows else None


def jsonable(v):
    if isinstance(v, InvalidText):
        return {"$text_invalid_utf8_hex": bytes(v).hex()}
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"$blob_b64": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, str):
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            return {"$text_surrogates": v.encode("utf-8", "surrogatepass").hex()}
    return v


def content_key(values):
    """Hashable identity of a row's content, type-exact: 1 != 1.0 != '1' != b'1', and
    0.0 != -0.0 (floats compared by their bits, so a NaN equals itself)."""
    types = tuple(map(type, values))
    if float in types:
        values = [v.hex() if t is float else v for v, t in zip(values, types)]
    return types, tuple(values)


def file_fingerprints(path):
    out = {}
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = path + suffix
        if os.path.exists(p):
            st = os.stat(p)
            out[suffix or "db"] = {"path": p, "size": st.st_size, "sha256": sha256_file(p),
                                   "mtime_ns": st.st_mtime_ns}
    return out


def schema_names(con, kind=None):
    if kind:
        return set(r[0] for r in con.execute(
            "SELECT name FROM main.sqlite_master WHERE type = ?", (kind,)))
    return set(r[0] for r in con.execute("SELECT name FROM main.sqlite_master"))
