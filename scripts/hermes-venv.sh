#!/bin/sh
# Create the hermes-agent 0.19.0 test venv used by tests/corpus (idempotent) and print its path.
# Why a separate venv: the corpus builds state.db with the REAL hermes_state.SessionDB, and
# hermes-agent's ~230 MB of dependencies must not leak into the fleetops test environment.
set -eu
VENV="${FLEETOPS_HERMES_VENV:-/opt/fleetops-test/hermes-venv}"
PY="${PYTHON:-python3}"
VERSION="0.19.0"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "
import sys, importlib.metadata as m, hermes_state
sys.exit(m.version('hermes-agent') != '$VERSION')" >/dev/null 2>&1; then
    echo "$VENV"
    exit 0
fi
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "hermes-agent $VERSION needs Python >= 3.11 (set PYTHON=)" >&2; exit 1; }
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
"$VENV/bin/python" -m pip install --quiet "hermes-agent==$VERSION" >&2
HERMES_DISABLE_LAZY_INSTALLS=1 TIRITH_ENABLED=0 "$VENV/bin/python" -c "import hermes_state" >&2
echo "$VENV"
