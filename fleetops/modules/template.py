"""`template`: render a Jinja2 file from templates/ with the task's variables, then copy it."""
from __future__ import annotations

import datetime
import os
import pwd

from fleetops.engine.module import Arg, Module, TaskContext, result
from fleetops.engine.templating import TemplateError
from fleetops.modules.copy import DEST_ARGS, find_source, put_content


def template_vars(path: str, dest) -> dict:
    """What ansible-core's template action gives the template about itself."""
    st = os.stat(path)
    try:
        uid = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        uid = str(st.st_uid)
    return {"template_uid": uid, "template_fullpath": os.path.abspath(path), "template_destpath": dest,
            "template_mtime": datetime.datetime.fromtimestamp(st.st_mtime),
            "template_run_date": datetime.datetime.now(), "ansible_managed": "Ansible managed"}


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
        variables.update(template_path=path, template_host=ctx.host, **template_vars(path, args.get("dest")))
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
