"""`--list-hosts` / `--list-tasks`: what a run would do, in ansible-playbook's own layout.

An Ansible user compares the two outputs line by line, so the layout is ansible-core's:
dynamic includes (include_tasks, include_role) are one line, static imports are expanded,
only a block's `block:` part is listed, handlers and implicit handler flushes are not.
"""
from __future__ import annotations

from fleetops.engine.tags import tags_match
from fleetops.engine.templating import Templar, TemplateError
from fleetops.errors import BadInput

DYNAMIC = ("include_tasks", "include_role")


def _task_lines(tasks, play_tags: set, only: set, skip: set) -> list:
    out = []
    for t in tasks or ():
        if t.implicit:
            continue
        if t.is_block and t.include not in DYNAMIC:
            out += _task_lines(t.block, play_tags, only, skip)
            continue
        if not tags_match(t.tags, only, skip):
            continue
        name = t.display_name if t.name else (t.action or t.module)
        out.append(f"      {name}\tTAGS: [{', '.join(sorted(play_tags | set(t.tags)))}]")
    return out


def outline(book, inventory, limit: str | None = None, hosts: bool = True, tasks: bool = True,
            only: set | None = None, skip: set | None = None, extra_vars: dict | None = None) -> str:
    """The text ansible-playbook --list-hosts --list-tasks prints for this playbook and inventory."""
    lines = ["", f"playbook: {book.path}"]
    allowed = set(inventory.select(limit)) if limit else None
    templar = Templar()
    for i, play in enumerate(book.plays):
        name = play.name
        if Templar.is_template(name):       # ansible-core shows the name rendered from play vars and -e
            try:
                name = templar.render(name, {**play.vars, **(extra_vars or {})})
            except TemplateError as exc:      # ansible-core 2.19 refuses to list it too
                raise BadInput(f"the play's name: {exc.msg}", where=play.key_where("name")) from None
        lines.append("")
        lines.append(f"  play #{i + 1} ({','.join(play.hosts_written)}): {name}\tTAGS: [{','.join(play.tags)}]")
        if hosts:
            selected = [h for h in inventory.select(play.hosts) if allowed is None or h in allowed]
            lines.append(f"    pattern: {play.hosts_written!r}")
            lines.append(f"    hosts ({len(selected)}):")
            lines += [f"      {h}" for h in selected]
        if tasks:
            lines.append("    tasks:")
            lines += _task_lines(play.tasks, set(play.tags), set(only or ()), set(skip or ()))
    return "\n".join(lines) + "\n"
