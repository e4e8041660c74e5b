#!/usr/bin/env bash
# Runs the linters and the whole test suite on a fresh Debian/Ubuntu machine: installs openssh-server, the
# Python dependencies and one test venv per Hermes version of tests/hermes_matrix.txt first.
# Needs root (the lab creates one Unix user per simulated host). Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
bash "$ROOT/scripts/hermes-venv.sh" >/dev/null
# Lab users run the real `hermes gateway` from a venv on the system python (a pyenv or
# /root-owned interpreter is out of their reach).
PYTHON=/usr/bin/python3 FLEETOPS_HERMES_VENV=/opt/fleetops-test/hermes-venv-shared \
  bash "$ROOT/scripts/hermes-venv.sh" >/dev/null
# The newer versions: one venv each on the system python, for the corpus and the lab alike.
for v in $(grep -v '^#' "$ROOT/tests/hermes_matrix.txt" | awk 'NF {print $1}' | tail -n +2); do
  PYTHON=/usr/bin/python3 bash "$ROOT/scripts/hermes-venv.sh" "$v" >/dev/null
done
cd "$ROOT"
# The linters first (ruff, vulture, mypy on the engine, the file-size rule): a finding fails the run
bash "$ROOT/scripts/lint.sh" "$VENV/bin/python"
# -rs: every skip is listed with its reason; tests/support/skip_policy.py fails the run on one outside its allow-list.
# --durations: the 25 slowest tests, so the suite's time (CI has 20 minutes for it) is watched where it goes
# -n 2 --dist loadgroup: two workers (CI has two cores); what is outside tests/unit runs on one of
# them in order (tests/conftest.py), the unit tests on the other
exec "$VENV/bin/python" -m pytest -p no:cacheprovider -rs --durations=25 -n 2 --dist loadgroup "$@"
