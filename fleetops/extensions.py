"""What fleetops is made of, composed once: the generic modules, then each extension package.

A module name none of them has is asked of ansible-core through the module bridge
(`fleetops.modules.bridge`) when ansible-core is installed.

This is the one file that names an extension package (`fleetops.hermes`): each registers its
own modules, commands, `fleetops report` sections and site views through `register(reg)`. The
CLI, `report.py`, the runner and the engine read what was registered and know nothing of
what it is.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from fleetops.engine.module import ModuleTable, by_name
from fleetops.hermes import extension as hermes_extension
from fleetops.modules import bridge
from fleetops.modules.registry import GENERIC

EXTENSIONS = (hermes_extension,)


@dataclass
class ReportSection:
    """A part of `fleetops report` an extension adds after the recap."""

    render: Callable[[dict, Any, argparse.Namespace], None]      # (run, console, args)
    document: Callable[[dict, argparse.Namespace], dict]         # (run, args) -> keys of the --json document


@dataclass
class Registry:
    description: str = "Run YAML playbooks over SSH across a fleet of hosts."
    modules: ModuleTable = field(default_factory=ModuleTable)   # name -> Module class, and the bridge
    commands: list[Callable[[Any], None]] = field(default_factory=list)        # add(subparsers)
    report_options: list[Callable[[argparse.ArgumentParser], None]] = field(default_factory=list)
    report_sections: list[ReportSection] = field(default_factory=list)
    site_views: list[Any] = field(default_factory=list)     # each has contribute(site): pages of report --html
    exit_codes: dict[int, str] = field(default_factory=dict)                  # code -> meaning, for --help
    next_steps: list[str] = field(default_factory=list)     # after `fleetops lab up`: "{inventory}" filled in

    def add_modules(self, classes) -> None:
        self.modules = ModuleTable(by_name(list(self.modules.values()) + list(classes)), self.modules.resolver)

    def add_report_section(self, render, document) -> None:
        self.report_sections.append(ReportSection(render, document))


_registry: Optional[Registry] = None


def registry() -> Registry:
    """The composed registry (built on first use, then shared)."""
    global _registry
    if _registry is None:
        reg = Registry(modules=ModuleTable(resolver=bridge.resolver()))
        reg.add_modules(GENERIC)
        for ext in EXTENSIONS:
            ext.register(reg)
        _registry = reg
    return _registry

