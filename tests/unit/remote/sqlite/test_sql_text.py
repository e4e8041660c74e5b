"""The one scanner of schema SQL: commas and parentheses count only outside quotes and brackets."""
from __future__ import annotations

import pytest

from fleetops.remote.sqlite.sql import partial_where, split_top


@pytest.mark.parametrize("text, parts", [
    ("a, b", ["a", " b"]),
    ("coalesce(a, b), c", ["coalesce(a, b)", " c"]),
    ("'x,y', \"a,b\", [c,d], `e,f`", ["'x,y'", ' "a,b"', " [c,d]", " `e,f`"]),
    ("lower(')'), b", ["lower(')')", " b"]),
    ("", [""]),
])
def test_split_top(text, parts):
    assert split_top(text) == parts


@pytest.mark.parametrize("sql, where", [
    ("CREATE INDEX i ON t(a, b)", None),
    ("CREATE UNIQUE INDEX i ON t(title) WHERE title IS NOT NULL", "title IS NOT NULL"),
    ("CREATE INDEX i ON t(lower(x), \")\") where (x > 1);", "(x > 1)"),
    ("CREATE INDEX i ON \"t(\"(a) WHERE a = ')'", "a = ')'"),
    (None, None),
])
def test_partial_where(sql, where):
    assert partial_where(sql) == where
