"""Loading an inventory: one file (YAML or INI, by extension or by its first line) or a directory
of them as ansible-core reads it, then the group_vars/ and host_vars/ beside it."""
from __future__ import annotations

import os
import re

from fleetops.engine.connection.transport import ConnDefaults
from fleetops.engine.inventory.builder import Builder
from fleetops.engine.inventory.ini_format import parse_ini
from fleetops.engine.inventory.model import Inventory
from fleetops.engine.inventory.vars_dirs import load_vars_dirs
from fleetops.engine.inventory.yaml_format import parse_yaml
from fleetops.errors import BadInput

YAML_EXTENSIONS = (".yml", ".yaml", ".json")
INI_EXTENSIONS = (".ini",)


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise BadInput("file not found", where=path) from None
    except IsADirectoryError:
        raise BadInput("is a directory, expected a file", where=path) from None
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror}", where=path) from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise BadInput("not UTF-8 text", where=f"{path}:{line}") from None


_YAML_LINE_RE = re.compile(r"^(---|\{|[^\s=#;\[][^=]*:\s*(#.*)?$)")


def detect_format(path: str, text: str) -> str:
    """'yaml' or 'ini': by extension, else by the first meaningful line."""
    ext = os.path.splitext(path)[1].lower()
    if ext in YAML_EXTENSIONS:
        return "yaml"
    if ext in INI_EXTENSIONS:
        return "ini"
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        return "yaml" if _YAML_LINE_RE.match(line) else "ini"
    return "ini"


# what ansible-core skips in an inventory directory (its INVENTORY_IGNORE_EXTS default)
IGNORED_EXTENSIONS = (".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig",
                      ".cfg", ".retry")
VARS_DIRS = ("group_vars", "host_vars")


def inventory_files(directory: str) -> list:
    """The inventory files of a directory, as ansible-core reads it: sorted, subdirectories
    recursed, hidden and ignored-extension files, group_vars/ and host_vars/ left out."""
    found = []
    for entry in sorted(os.listdir(directory)):
        full = os.path.join(directory, entry)
        if entry.startswith(".") or entry.endswith(IGNORED_EXTENSIONS):
            continue
        if os.path.isdir(full):
            if entry not in VARS_DIRS:
                found.extend(inventory_files(full))
        elif os.path.isfile(full):
            found.append(full)
    return found


def load_inventory(path: str, conn_defaults: ConnDefaults | None = None) -> Inventory:
    """Load an inventory file (YAML or INI), or every inventory file of a directory, and the
    group_vars/, host_vars/ beside the file (or inside the directory); `conn_defaults`
    (ansible.cfg's) sit below every host variable."""
    path = os.fspath(path)
    b = Builder(path)
    if os.path.isdir(path):
        files, base = inventory_files(path), path
        if not files:
            raise BadInput("inventory directory holds no inventory file", where=path)
    else:
        files, base = [path], os.path.dirname(path)
    for f in files:
        text = _read_text(f)
        if detect_format(f, text) == "yaml":
            parse_yaml(b, text, f)
        else:
            parse_ini(b, text, f)
    inv = b.finish()
    inv.vars_base = base
    if conn_defaults is not None:
        inv.conn_defaults = conn_defaults
    load_vars_dirs(inv, base)
    return inv
