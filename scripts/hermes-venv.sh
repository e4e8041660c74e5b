#!/bin/sh
# Create the test venv of one Hermes version of the matrix (tests/hermes_matrix.txt), idempotent,
# and print its path. Usage: hermes-venv.sh [VERSION]  (default 0.19.0)
# Why one venv per version: the corpus builds state.db with each version's REAL SessionDB and
# the lab runs its real gateway; ~230 MB of dependencies each, which must not leak into the
# fleetops test environment nor into each other (the 0.20.1 repackaging conflicts with 0.19.0).
# Venv: $FLEETOPS_HERMES_VENV, else /opt/fleetops-test/hermes-venv (0.19.0) or
# /opt/fleetops-test/hermes-VERSION-venv; the interpreter is $PYTHON, else python3.
set -eu
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="${1:-0.19.0}"
LINE="$(grep -v '^#' "$ROOT/tests/hermes_matrix.txt" | awk -v v="$VERSION" '$1 == v')"
[ -n "$LINE" ] || { echo "hermes-venv: $VERSION is not in tests/hermes_matrix.txt" >&2; exit 2; }
REQ="$(echo "$LINE" | awk '{print $2}')"
DIST="${REQ%%==*}"
if [ "$VERSION" = 0.19.0 ]; then DEFAULT=/opt/fleetops-test/hermes-venv
else DEFAULT="/opt/fleetops-test/hermes-$VERSION-venv"; fi
VENV="${FLEETOPS_HERMES_VENV:-$DEFAULT}"
PY="${PYTHON:-python3}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "
import sys, importlib.metadata as m, hermes_state
sys.exit(m.version('$DIST') != '${REQ##*==}')" >/dev/null 2>&1; then
    echo "$VENV"
    exit 0
fi
"$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || {
    echo "Hermes $VERSION needs Python >= 3.11 (set PYTHON=)" >&2; exit 1; }
mkdir -p "$(dirname "$VENV")"
"$PY" -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
"$VENV/bin/python" -m pip install --quiet "$REQ" >&2
HERMES_DISABLE_LAZY_INSTALLS=1 TIRITH_ENABLED=0 "$VENV/bin/python" -c "import hermes_state" >&2
echo "$VENV"
