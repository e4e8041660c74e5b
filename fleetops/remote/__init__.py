"""Host-side code: stdlib-only Python 3.8+ run by the host's python3.

`host/` holds generic host helpers and payloads, `sqlite/` SQLite's file format, salvage and
locks, `hermes/` everything that knows Hermes. The bundler in fleetops/engine/payload.py ships
a payload and the `fleetops.remote.*` modules it imports over SSH stdin; nothing is installed
on the host. Keep this file import-free: it is shipped as the package itself.

PAYLOADS names each payload a module runs (the module's own name) after the dotted path of its
entry file; a payload can also be addressed by that path.
"""

PAYLOADS = {
    "facts": "host.facts",
    "ping": "host.ping",
    "copy": "host.copy",
    "template": "host.template",
    "file": "host.file",
    "tempfile": "host.mktemp",
    "fetch": "host.fetch",
    "wait_for": "host.wait_for",
    "stat": "host.stat",
    "lineinfile": "host.lineinfile",
    "package": "host.package",
    "cron": "host.cron",
    "systemd": "host.systemd",
    "systemd_user": "host.systemd_user",
    "async_job": "host.async_job",
    "async_status": "host.async_status",
    "ansiballz": "host.ansiballz",
    "sqlite_version": "sqlite.version",
    "salvage": "hermes.salvage",
    "hermes_audit": "hermes.audit",
    "hermes_backup": "hermes.backup",
    "hermes_hostlock": "hermes.hostlock",
    "hermes_snapshot": "hermes.snapshot",
    "hermes_stop_writers": "hermes.stop_writers",
    "hermes_start_writers": "hermes.start_writers",
    "hermes_quarantine": "hermes.quarantine",
    "hermes_repair": "hermes.repair",
    "hermes_verify": "hermes.verify",
    "hermes_swap": "hermes.swap",
    "hermes_rollback": "hermes.rollback",
}
