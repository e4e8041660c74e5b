"""What the application that made a store knows and SQLite does not, passed into a salvage run:
salvage itself knows no application (fleetops.remote.hermes.salvage_rules holds Hermes')."""


class LostSchema(object):
    """The shipped DDL for the objects a store lost with its schema page: `objects` is
    [(type, name, tbl_name, sql)] in creation order, `fields` go into the report's
    schema_fallback, `made_by` names the schema in its note ("Hermes 0.19.0")."""

    def __init__(self, objects, fields, made_by):
        self.objects = objects
        self.fields = fields
        self.made_by = made_by


class Rules(object):
    """repairs: {(table, column): fn(out, (rowid, values, columns)) -> (value, why) or (None, None)},
    a value for a NOT NULL column a row lost, read from the rows already in the output `out`;
    repair_order: the tables loaded first, in this order (those the repairs read);
    lost_schema: fn(rows, reader) -> (LostSchema or None, how): the DDL of objects lost with the
    schema page, told from the surviving schema rows (and the page reader); None: no fallback;
    recognised_as: what a store with neither a schema nor a fallback is not recognised as."""

    def __init__(self, repairs=None, repair_order=(), lost_schema=None,
                 recognised_as="store whose schema fleetops ships"):
        self.repairs = dict(repairs or {})
        self.repair_order = list(repair_order)
        self.lost_schema = lost_schema
        self.recognised_as = recognised_as


def load_order(s):
    """The target tables in the order their rows go in: the rules' repair_order first."""
    names = list(s.schema.states)
    return [n for n in s.args.rules.repair_order if n in names] + [n for n in names if n not in s.args.rules.repair_order]
