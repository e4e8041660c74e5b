"""A bridged ansible-core module as a fleetops Module: its `args` from the module's documented
options, `check_static` refusing what ansible-core would before the run, and `run` sending the
AnsiballZ wrapper through `ctx.payload` (become, environment, the run lock as for any payload)
to the host payload `ansiballz`, then reading the module's JSON back with ansible-core's rules."""
from __future__ import annotations

import json
import re
from typing import Optional

from fleetops.engine.boolean import boolean
from fleetops.engine.module import Module, TaskContext, result
from fleetops.errors import BadInput
from fleetops.modules.bridge import build, loader, spec


class Bridged(Module):
    """The base of every bridged module class; `found` is what the loader read of it."""

    found: loader.Found

    @classmethod
    def check_static(cls, args: dict, where: str) -> None:
        if cls.found.problem:
            raise BadInput(cls.found.problem, where=where)
        if cls.found.options is not None:
            spec.check(cls.name, cls.found.options, args, where)

    @classmethod
    def defines(cls, task, base_dir: str) -> set:
        """The facts the module documents it sets (RETURN's ansible_facts), an `<option>` in a
        name filled from the task's own literal argument (getent's `getent_<database>`)."""
        args = task.args if isinstance(task.args, dict) else {}
        out = set()
        for name in cls.found.facts:
            for opt in re.findall(r"<(\w+)>", name):
                value = args.get(opt)
                if isinstance(value, str) and "{{" not in value:
                    name = name.replace(f"<{opt}>", value)
            if "<" not in name:
                out.add(name)
        return out

    def run(self, ctx: TaskContext, args: dict) -> dict:
        found = self.found
        if ctx.async_job is not None:
            return result(failed=True, msg=f"module '{found.name}': async is not supported through the "
                                           "ansible-core module bridge")
        no_log = _no_log(ctx)
        margs = build.module_args(found, args, ctx.check, ctx.diff, no_log)
        python = ctx.transport.params.python if ctx.transport is not None else None
        try:
            style, source = build.wrapper(found, margs, python)
        except Exception as e:  # noqa: BLE001 - ansible-core's packing error is this task's failure
            return result(failed=True, msg=f"ansible-core could not pack module '{found.name}': {e}")
        if style != "new":
            return result(failed=True, msg=f"module '{found.name}' is an {style}-style module; the bridge "
                                           "runs AnsiballZ (new-style Python) modules only")
        out = ctx.payload("ansiballz", {"wrapper": source})
        if "module_rc" not in out:          # the payload itself did not run (no python, sudo, timeout)
            return dict(out)
        res = module_result(out, ctx.diff)
        res["payload_seconds"] = out.get("payload_seconds")
        return res


def _no_log(ctx: TaskContext) -> bool:
    flag = getattr(ctx.task, "no_log", None)
    if isinstance(flag, str) and ("{{" in flag or "{%" in flag):
        try:
            flag = ctx.templar.render(flag, ctx.variables)
        except Exception:  # noqa: BLE001 - when in doubt, hide
            return True
    return boolean(flag, strict=False) if flag is not None else False


def module_result(out: dict, diff: bool) -> dict:
    """The module's result as ansible-core's action base and task executor leave it: the JSON
    object in its stdout (lines around it ignored), internal keys removed, `failed` from `rc`
    when the module did not say, `changed` false unless said; `diff` only under --diff."""
    from ansible.module_utils.json_utils import _filter_non_json_lines
    stdout, stderr, rc = out.get("module_stdout", ""), out.get("module_stderr", ""), out.get("module_rc")
    try:
        text, _warnings = _filter_non_json_lines(stdout, objects_only=True)
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except ValueError as e:
        return {"failed": True, "changed": False,
                "msg": f"Module result deserialization failed: {e}. See stdout/stderr for the returned output.",
                "module_stdout": stdout, "module_stderr": stderr, "rc": rc}
    data = {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("_ansible_"))}
    if "results" in data and not isinstance(data["results"], list):
        data["ansible_module_results"] = data.pop("results")
    for key in ("stdout", "stderr"):
        if key in data and f"{key}_lines" not in data:
            data[f"{key}_lines"] = (data.get(key) or "").splitlines()
    if "failed" not in data:
        data["failed"] = "rc" in data and data["rc"] not in (0, "0")
    data["failed"] = bool(data["failed"])
    data["changed"] = bool(data.get("changed", False))
    if not diff:
        data.pop("diff", None)
    return data


def bridged(name: str) -> Optional[type[Module]]:
    """The Module class for ansible-core's module `name`, or None when ansible-core has none."""
    found = loader.find(name)
    if found is None:
        return None
    attrs = {"name": name, "found": found, "__doc__": f"ansible-core's {found.fqcn}, through the bridge.",
             "args": spec.args_of(found.options) if found.options is not None and not found.problem else {},
             "any_args": found.options is None or bool(found.problem)}   # a refused one: refused whole
    return type(f"Bridged_{found.fqcn.replace('.', '_')}", (Bridged,), attrs)
