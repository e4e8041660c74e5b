"""Payload of `fleetops salvage` on a host (python: {payload: salvage}): the generic salvage of
a Hermes state.db, given Hermes' rules."""
from fleetops.remote.hermes.salvage_rules import RULES
from fleetops.remote.sqlite import salvage


def main(args):
    """{source, output, fts?, schema_from?, quarantine_freelist?, report?, _check?}."""
    return salvage.main(args, rules=RULES)
