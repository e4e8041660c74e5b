"""Ansible's tag selection (--tags / --skip-tags), shared by the run and by --list-tasks."""
from __future__ import annotations

from collections.abc import Iterable


def tags_match(task_tags: Iterable[str] | None, only: Iterable[str] | None, skip: Iterable[str] | None) -> bool:
    """Ansible's tag selection: `always` runs unless skipped by name, `never` only when asked for."""
    tags = set(task_tags or ())
    only = set(only or ()) or {"all"}
    skip = set(skip or ())
    if "always" in tags and "always" not in skip:
        run = True
    elif "all" in only and "never" not in tags:
        run = True
    elif tags & only:
        run = True
    elif "tagged" in only and tags and "never" not in tags:
        run = True
    elif "untagged" in only and not tags:
        run = True
    else:
        run = False
    if run and skip:
        if "all" in skip:
            if "always" not in tags or "always" in skip:
                run = False
        elif tags & skip:
            run = False
        elif "tagged" in skip and tags:
            run = False
        elif "untagged" in skip and not tags:
            run = False
    return run
