"""`template`: render a Jinja2 file from templates/ with the task's variables, then copy it."""
from __future__ import annotations

import os

from fleetops.engine.module import Arg, Module, TaskContext, result
from fleetops.engine.templating import TemplateError
from fleetops.modules.copy import DEST_ARGS, find_source, put_content


class Template(Module):
    name = "template"
    args = {
        "src": Arg(str, required=True),
        **DEST_ARGS,
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        path = find_source(ctx, args["src"], "templates")
        if path is None or os.path.isdir(path):
            return result(failed=True, msg=f"template {args['src']} not found (looked in templates/ beside the playbook and the project)")
        with open(path, encoding="utf-8") as f:
            source = f.read()
        variables = dict(ctx.variables)
        variables.update(template_path=path, template_host=ctx.host)
        try:
            rendered = ctx.templar.render(source, variables)
        except TemplateError as e:
            return result(failed=True, msg=f"{os.path.basename(path)}: {e}")
        rendered = rendered if isinstance(rendered, str) else str(rendered)
        if source.endswith("\n") and ctx.templar.render("x\n", {}) == "x":
            rendered += "\n"     # Jinja2 by default drops the final newline; a config file keeps it
        name = os.path.basename(path)
        if name.endswith(".j2"):
            name = name[:-3]
        return put_content(ctx, args, rendered.encode("utf-8"), name, payload="template")
