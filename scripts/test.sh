#!/usr/bin/env bash
# Runs the whole test suite on a fresh Debian/Ubuntu machine: installs openssh-server,
# the Python dependencies and the hermes-agent test venv first. Needs root (the lab
# creates one Unix user per simulated host). Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/hermes-venv.sh" >/dev/null
cd "$ROOT"
exec "$VENV/bin/python" -m pytest -p no:cacheprovider "$@"
