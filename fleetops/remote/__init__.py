"""Host-side payloads: stdlib-only Python 3.8+ files run by the host's python3.

The bundler in fleetops/engine/payload.py ships a payload and the
`fleetops.remote.*` modules it imports over SSH stdin; nothing is installed on
the host. Keep this file import-free: it is shipped as the package itself.
"""
