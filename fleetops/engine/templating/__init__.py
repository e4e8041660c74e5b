"""Sandboxed Jinja2 for task arguments and conditions, with Ansible's filter and test names.

Why a sandbox: playbooks, inventories and (worse) host output flow into
templates; a template must never reach Python internals (`__class__`,
`__globals__`, `__subclasses__`), so everything runs in Jinja2's
ImmutableSandboxedEnvironment with StrictUndefined.

Variables are lazy, as in Ansible: a variable whose value is itself a template
(`db: "{{ ansible_user_dir }}/.hermes/state.db"`) is rendered when it is used.
Everything a render produces, and everything wrapped with `mark_unsafe` (the
executor wraps registered results and gathered facts), is `UnsafeText` and is
never rendered again, so text coming from a host cannot smuggle in a template.

errors (TemplateError), unsafe (UnsafeText, mark_unsafe), filters (ansible-core's filter and
test names), templar (rendering, conditions, reading a template's variables).
"""
from fleetops.engine.templating.errors import TemplateError
from fleetops.engine.templating.templar import Templar
from fleetops.engine.templating.unsafe import UnsafeText, mark_unsafe

__all__ = ["TemplateError", "Templar", "UnsafeText", "mark_unsafe"]
