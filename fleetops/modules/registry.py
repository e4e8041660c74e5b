"""Module registry: every Module subclass in fleetops.modules.* and fleetops.hermes.*, by name.

Discovery instead of a hand-kept list means a new module file is usable (and
validated) by dropping it in; two modules claiming one name is an error.
"""
from __future__ import annotations

import importlib
import pkgutil

from fleetops.modules.base import Module

PACKAGES = ("fleetops.modules", "fleetops.hermes")
_SKIP = {"fleetops.modules.base", "fleetops.modules.registry"}
_cache: dict | None = None


def _walk(package_name: str):
    try:
        package = importlib.import_module(package_name)
    except ModuleNotFoundError as e:
        if e.name == package_name:
            return            # the Hermes package is optional
        raise
    for info in pkgutil.iter_modules(package.__path__, package_name + "."):
        if info.name in _SKIP or info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        yield importlib.import_module(info.name)


def get_modules(refresh: bool = False) -> dict[str, type[Module]]:
    """name -> Module class. Raises RuntimeError when two classes claim the same name."""
    global _cache
    if _cache is not None and not refresh:
        return dict(_cache)
    found: dict[str, type[Module]] = {}
    for pkg in PACKAGES:
        for mod in _walk(pkg):
            for obj in vars(mod).values():
                if (isinstance(obj, type) and issubclass(obj, Module) and obj is not Module
                        and obj.__module__ == mod.__name__ and obj.name):
                    other = found.get(obj.name)
                    if other is not None and other is not obj:
                        raise RuntimeError(f"module name {obj.name!r} is claimed by {other.__module__} and {obj.__module__}")
                    found[obj.name] = obj
    _cache = found
    return dict(found)
