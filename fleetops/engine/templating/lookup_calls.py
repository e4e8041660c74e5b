"""`lookup()`, `query()` and `q()` as template globals, and a `with_<lookup>` loop's items: the
plugins of templating/lookups.py called with the render's own (lazy) variables."""
from __future__ import annotations

import os
from typing import Any

import jinja2

from fleetops.engine.templating.lookups import LookupEnv, invoke, listify_terms


_STYLE = ("variable_start_string", "variable_end_string", "comment_start_string", "comment_end_string",
          "block_start_string", "block_end_string", "trim_blocks", "lstrip_blocks")


def _env(templar: Any, variables: Any) -> LookupEnv:
    env = LookupEnv(variables=variables)

    def render_file(path: str, extra: dict, style: dict | None = None) -> str:
        """The template file rendered in the sandbox, `{% include %}` and `{% import %}` found in
        the lookup's search path (templates/ of the role and the playbook, then the file's own)."""
        with open(path, encoding="utf-8") as f:
            text = f.read()
        dirs = [os.path.dirname(path)] + [p for d in env.search_dirs() for p in (os.path.join(d, "templates"), d)]
        # as ansible-core's template lookup: trim_blocks, an included file's last newline dropped,
        # the template's own kept
        opts = {"trim_blocks": True, **{k: v for k, v in (style or {}).items() if k in _STYLE}}
        overlay = templar.env.overlay(loader=jinja2.FileSystemLoader(dirs), keep_trailing_newline=False, **opts)
        base = getattr(variables, "_vars", variables)
        tmpl = overlay.from_string(text)
        ctx = tmpl.new_context(templar.lazy({**base, **extra}), shared=True)
        out = "".join(str(x) for x in tmpl.root_render_func(ctx))
        return out + "\n" if text.endswith("\n") and not out.endswith("\n") else out
    env.render_file = render_file
    return env


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
