"""A module name resolved as ansible-core resolves it: its plugin loader (builtin modules,
`ansible.builtin.`/`ansible.legacy.` names, redirects, installed collections), and its options
read from its DOCUMENTATION by ansible-core's plugin_docs (doc fragments merged)."""
from __future__ import annotations

import contextlib
import io
import threading
from dataclasses import dataclass
from typing import Optional

# ansible-core versions the bridge was built and tested against (module_common's 2.19 API)
SUPPORTED = ("2.19.",)
_lock = threading.Lock()
_ready = False


@dataclass
class Found:
    """One ansible-core module, as the bridge needs it."""

    name: str                     # as the task wrote it
    fqcn: str                     # ansible.builtin.replace
    path: str                     # the module's source file
    action: Optional[str] = None  # its own action plugin (not `normal`): the bridge cannot run it
    options: Optional[dict] = None    # DOCUMENTATION's options; None: undocumented (any argument)
    version: str = ""             # ansible-core's version
    problem: str = ""             # why the bridge refuses it before the run (empty: it can run it)
    facts: tuple = ()             # RETURN's ansible_facts names, `<option>` standing for an argument


def _quiet():
    """ansible-core prints its warnings (a collection that fails to load) on stderr: kept out of
    fleetops' own output."""
    return contextlib.redirect_stderr(io.StringIO())


def _init() -> None:
    global _ready
    if not _ready:
        from ansible.plugins.loader import init_plugin_loader
        with _quiet():
            init_plugin_loader()
        _ready = True


def find(name: str) -> Optional[Found]:
    """The module `name` names in ansible-core, or None (no such module, or not a Python one)."""
    from ansible.release import __version__
    with _lock:
        _init()
        from ansible.plugins.loader import action_loader, fragment_loader, module_loader
        with _quiet():
            ctx = module_loader.find_plugin_with_context(name)
            if not ctx.resolved or not ctx.plugin_resolved_path or not ctx.plugin_resolved_path.endswith(".py"):
                return None
            fqcn = ctx.resolved_fqcn
            found = Found(name=name, fqcn=fqcn, path=ctx.plugin_resolved_path, version=__version__)
            act = action_loader.find_plugin_with_context(fqcn)
            if act.resolved and act.resolved_fqcn not in ("ansible.builtin.normal", "ansible.legacy.normal"):
                found.action = act.resolved_fqcn
            try:
                from ansible.utils.plugin_docs import get_docstring
                doc, _examples, returns, _meta = get_docstring(found.path, fragment_loader, is_module=True,
                                                               collection_name=".".join(fqcn.split(".")[:2]))
            except Exception:  # noqa: BLE001 - a module whose docs do not parse takes any argument
                doc, returns = {}, {}
    doc = doc if isinstance(doc, dict) else {}
    facts = (returns or {}).get("ansible_facts") if isinstance(returns, dict) else None
    if isinstance(facts, dict) and isinstance(facts.get("contains"), dict):
        found.facts = tuple(k for k in facts["contains"] if isinstance(k, str))
    if isinstance(doc.get("options"), dict):
        found.options = doc["options"]
    elif "options" in doc:
        found.options = {}
    if not __version__.startswith(SUPPORTED):
        found.problem = (f"ansible-core {__version__} is installed; the module bridge supports "
                         f"{', '.join(v + 'x' for v in SUPPORTED)}")
    elif found.action:
        found.problem = (f"module '{name}' needs ansible-core's action plugin {found.action}, which the "
                         "module bridge does not run (only modules run by the normal action)")
    return found

