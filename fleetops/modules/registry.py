"""The generic modules, listed by hand: a new module file is usable once it is named here."""
from __future__ import annotations

from fleetops.engine.module import Module
from fleetops.modules.add_host import AddHost
from fleetops.modules.apt import Apt
from fleetops.modules.assert_ import Assert
from fleetops.modules.command import Command
from fleetops.modules.copy import Copy
from fleetops.modules.cron import Cron
from fleetops.modules.debug import Debug
from fleetops.modules.dnf import Dnf
from fleetops.modules.fail import Fail
from fleetops.modules.fetch import Fetch
from fleetops.modules.file import File
from fleetops.modules.group_by import GroupBy
from fleetops.modules.async_status import AsyncStatus
from fleetops.modules.include_vars import IncludeVars
from fleetops.modules.lineinfile import LineInFile
from fleetops.modules.meta import Meta
from fleetops.modules.package import Package
from fleetops.modules.pause import Pause
from fleetops.modules.ping import Ping
from fleetops.modules.python import Python
from fleetops.modules.raw import Raw
from fleetops.modules.script import Script
from fleetops.modules.service import Service
from fleetops.modules.set_fact import SetFact
from fleetops.modules.setup import GatherFactsTask, Setup
from fleetops.modules.shell import Shell
from fleetops.modules.stat import Stat
from fleetops.modules.systemd import Systemd, SystemdService
from fleetops.modules.systemd_user import SystemdUser
from fleetops.modules.tempfile import TempFile
from fleetops.modules.template import Template
from fleetops.modules.wait_for import WaitFor

GENERIC: tuple[type[Module], ...] = (
    AddHost, Apt, Assert, AsyncStatus, Command, Copy, Cron, Debug, Dnf, Fail, Fetch, File, GroupBy, IncludeVars, LineInFile, Meta,
    Package, Pause, Ping, Python, Raw, Script, Service, SetFact, Setup, GatherFactsTask, Shell, Stat, Systemd, SystemdService, SystemdUser, TempFile, Template,
    WaitFor,
)
