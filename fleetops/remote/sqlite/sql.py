"""SQL text the host code builds: an identifier quoted the one way SQLite reads it back."""


def quote_ident(name):
    """`name` as a double-quoted SQL identifier (embedded quotes doubled): safe for any name a
    damaged schema may hold."""
    return '"' + str(name).replace('"', '""') + '"'
