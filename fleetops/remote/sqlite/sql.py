"""SQL text the host code builds and reads: an identifier quoted the one way SQLite reads it
back, and the one scanner that reads a schema's SQL outside its quotes and brackets."""


def quote_ident(name):
    """`name` as a double-quoted SQL identifier (embedded quotes doubled): safe for any name a
    damaged schema may hold."""
    return '"' + str(name).replace('"', '""') + '"'


def unquoted(text, start=0):
    """(index, char, depth) of each character of `text` from `start` that stands outside quotes
    ('', "", ``, []), depth counting the parentheses open after it."""
    depth, quote = 0, None
    for j in range(start, len(text)):
        ch = text[j]
        if quote:
            quote = None if ch == quote else quote
            continue
        if ch in "'\"`[":
            quote = "]" if ch == "[" else ch
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        yield j, ch, depth


def split_top(text):
    """`text` split at the commas outside parentheses and quotes."""
    cuts = [j for j, ch, depth in unquoted(text) if ch == "," and depth == 0]
    return [text[a + 1:b] for a, b in zip([-1] + cuts, cuts + [len(text)])]


def partial_where(sql):
    """The WHERE clause of a partial index's CREATE INDEX (what follows the column list), or None."""
    sql = sql or ""
    opened = False
    for j, ch, depth in unquoted(sql):
        opened = opened or ch == "("
        if opened and ch == ")" and depth == 0:
            rest = sql[j + 1:].strip().rstrip(";").strip()
            return rest[5:].strip() if rest[:5].upper() == "WHERE" else None
    return None
