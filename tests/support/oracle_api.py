"""Run inside the test venv's python: ansible-core's own InventoryManager and VariableManager (the
code behind `ansible --list-hosts` and the magic variables) over many inventories in one process.

stdin: JSON [{"inventory": path, "patterns": [...]}]; stdout: JSON, per inventory either
{"error": msg} or {"patterns": {pattern: [hosts] | "error: ..."}, "short": {host: inventory_hostname_short}}.
The caller sets the ANSIBLE_* environment (tests/support/oracle.py) before this imports ansible.
"""
import json
import sys


def main():
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    out = []
    for item in json.load(sys.stdin):
        loader = DataLoader()
        try:
            inv = InventoryManager(loader=loader, sources=[item["inventory"]])
        except Exception as exc:   # ansible-core refuses the source
            out.append({"error": str(exc).splitlines()[0]})
            continue
        vm = VariableManager(loader=loader, inventory=inv)
        patterns = {}
        for pattern in item["patterns"]:
            try:
                patterns[pattern] = [h.name for h in inv.list_hosts(pattern)]
            except Exception as exc:
                patterns[pattern] = "error: " + str(exc).splitlines()[0]
            inv.clear_pattern_cache()
        short = {}
        for host in inv.get_hosts("all"):
            magic = vm.get_vars(host=host, include_hostvars=False)
            short[host.name] = str(magic["inventory_hostname_short"])
        out.append({"patterns": patterns, "short": short})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
