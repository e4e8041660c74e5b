#!/usr/bin/env bash
# The tree's linters, run by scripts/test.sh before the tests: ruff (pyflakes and bugbear rules)
# on everything ours, vulture for dead code in the product, mypy on the engine and the host code (pyproject [tool.mypy] packages),
# and the file-size rule (no product file over 600 lines unless pyproject.toml [tool.fleetops.file_sizes] allows it, with its reason).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${1:-$ROOT/.venv/bin/python}"
cd "$ROOT"
"$PY" -m ruff check --quiet --select F,B fleetops bench scripts tests --exclude tests/data
"$PY" -m vulture fleetops scripts/vulture_allow.py --min-confidence 60
"$PY" -m mypy --no-error-summary
"$PY" scripts/file_sizes.py
