"""Ansible-compatible inventory: YAML or INI, plus group_vars/ and host_vars/ beside it.

Existing Ansible inventories must work unchanged, so parsing, host ranges, value literals and
variable precedence follow ansible-core (checked against 2.19). load (which files, which
format), yaml_format and ini_format (the two parsers), builder (declarations into the model),
model (groups, hosts, variable precedence), hostnames (ranges, host:port), vars_dirs
(group_vars/, host_vars/). How a host's variables become its connection:
engine/connection/hostvars.py.
"""
from fleetops.engine.inventory.hostnames import expand_host_range, split_host_port
from fleetops.engine.inventory.ini_format import parse_ini_value
from fleetops.engine.inventory.load import detect_format, inventory_files, load_inventory
from fleetops.engine.inventory.model import Group, Host, Inventory, short_name

__all__ = ["Group", "Host", "Inventory", "detect_format", "expand_host_range", "inventory_files",
           "load_inventory", "parse_ini_value", "short_name", "split_host_port"]
