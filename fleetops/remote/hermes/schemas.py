"""The Hermes state.db schemas fleetops ships, and which one a damaged store was made by.

Why: a store whose schema page is lost still holds its rows; the DDL of the lost objects is
what the host's own Hermes version creates. Each version is one generated module
(schema_<schema_version>.py, from the real package by tests/corpus/ship_schema.py),
listed in KNOWN. Stdlib only (host payload).
"""
import re

from fleetops.remote.hermes import schema_22 as hermes_schema_22

KNOWN = (hermes_schema_22,)


def _norm(sql):
    return re.sub(r"\s+", " ", sql or "").strip()


def identify(rows, schema_version=None):
    """(module, how) for the shipped schema the surviving schema ``rows`` (dicts with name and
    sql) belong to, or (None, why). The store's own schema_version decides when it was read;
    otherwise the surviving DDL must match one version's, object for object, and no other's."""
    if schema_version is not None:
        for m in KNOWN:
            if m.SCHEMA_VERSION == schema_version:
                return m, "schema_version %d read from the store" % schema_version
        return None, "schema_version %r is not one fleetops ships (%s)" % (
            schema_version, ", ".join(str(m.SCHEMA_VERSION) for m in KNOWN))
    fits = []
    for m in KNOWN:
        ddl = dict((o[1], _norm(o[3])) for o in m.OBJECTS)
        same = [r["name"] for r in rows if r.get("sql") and ddl.get(r["name"]) == _norm(r["sql"])]
        differ = [r["name"] for r in rows if r.get("sql") and r["name"] in ddl
                  and ddl[r["name"]] != _norm(r["sql"])]
        unknown = [r["name"] for r in rows if r.get("sql") and r["name"] not in ddl]
        if same and not differ and not unknown:
            fits.append((m, len(same)))
    if len(fits) == 1:
        return fits[0][0], "the DDL of %d surviving objects is exactly that version's" % fits[0][1]
    if not fits:
        return None, "the surviving DDL matches no schema fleetops ships"
    return None, "the surviving DDL fits several versions (%s)" % ", ".join(
        m.HERMES_VERSION for m, _n in fits)
