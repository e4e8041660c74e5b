"""The ansible-core module bridge: a module fleetops has no native version of runs as
ansible-core's own module, when ansible-core is installed beside fleetops (an optional extra).

`resolver()` is what the registry asks for a name it has not: it answers a Module class built
from the module's documented options (validated before any host is contacted), whose run packs
the module with ansible-core's module_common (AnsiballZ) and runs the wrapper on the host's
python over fleetops' own connection. Nothing here imports ansible until a name is asked for,
so fleetops without ansible-core behaves as if this package were not there.
"""
from __future__ import annotations

import importlib.util
import os
from typing import Callable, Optional

OFF_VAR = "FLEETOPS_ANSIBLE_BRIDGE"     # "0"/"false"/"no"/"off": do not bridge


def available() -> bool:
    """ansible-core can be imported here (looked up, not imported) and the bridge is not turned off."""
    if os.environ.get(OFF_VAR, "").strip().lower() in ("0", "false", "no", "off"):
        return False
    return importlib.util.find_spec("ansible") is not None


def resolver() -> Optional[Callable]:
    """The registry's resolver for unknown module names, or None without ansible-core."""
    if not available():
        return None

    def resolve(name: str):
        from fleetops.modules.bridge.module import bridged
        return bridged(name)
    return resolve
