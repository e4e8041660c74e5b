"""`lookup()`, `query()` and `q()` as template globals, and a `with_<lookup>` loop's items: the
plugins of templating/lookups.py called with the render's own (lazy) variables."""
from __future__ import annotations

from typing import Any

import jinja2

from fleetops.engine.templating.lookups import LookupEnv, invoke, listify_terms


def _env(templar: Any, variables: Any) -> LookupEnv:
    def render_file(path: str, extra: dict) -> str:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        base = getattr(variables, "_vars", variables)
        return str(templar.render(text, {**base, **extra}))
    return LookupEnv(variables=variables, render_file=render_file)


def lookup_globals(templar: Any) -> dict:
    """The three names ansible-core gives every template."""

    @jinja2.pass_context
    def lookup(context, name, *terms, **kwargs):
        return invoke(str(name), list(terms), _env(templar, context.parent), dict(kwargs), query=False)

    @jinja2.pass_context
    def query(context, name, *terms, **kwargs):
        return invoke(str(name), list(terms), _env(templar, context.parent), dict(kwargs), query=True)

    return {"lookup": lookup, "query": query, "q": query}


def loop_items(templar: Any, name: str, terms: Any, variables: dict) -> list:
    """The items of `with_<name>: terms`: the terms rendered, then the plugin's list (wantlist)."""
    rendered = templar.render(terms, variables)
    return invoke(name, listify_terms(rendered), _env(templar, variables), {}, query=True)
