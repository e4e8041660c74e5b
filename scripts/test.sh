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
# --durations: the slowest tests, so the suite's time (CI has 20 minutes for it) is watched where it goes
PYTEST=("$VENV/bin/python" -m pytest -p no:cacheprovider -rs)
if [ "$#" -gt 0 ]; then
  exec "${PYTEST[@]}" --durations=25 "$@"
fi
# The whole suite: two pytest runs side by side (CI has two cores). tests/unit needs nothing of the
# machine's; the rest (the lab's users and sshds, sudoers rules, the machine's dpkg, shared caches)
# runs in one process, in order. The run fails if either does, and either exits 5 if it ran no test.
unit_log="$(mktemp /tmp/fleetops-unit-tests.XXXXXX)"
# Each run's tmp_path root is its own; a passing test's goes at the end (pyproject's
# tmp_path_retention_policy), and what is left is measured below.
tmp_root="$(mktemp -d /tmp/fleetops-pytest.XXXXXX)"
tmp_before_kb="$(du -sk /tmp 2>/dev/null | cut -f1 || true)"
"${PYTEST[@]}" --durations=10 --basetemp="$tmp_root/unit" tests/unit >"$unit_log" 2>&1 &
unit_pid=$!
trap 'kill "$unit_pid" 2>/dev/null || true' INT TERM
set +e
"${PYTEST[@]}" --durations=25 --basetemp="$tmp_root/rest" --ignore=tests/unit
rest=$?
wait "$unit_pid"
unit=$?
set -e
echo
echo "=== tests/unit (run beside the rest): $unit_log ==="
cat "$unit_log"
echo "=== exit: tests/unit $unit, the rest $rest ==="
if [ "$rest" -ne 0 ]; then exit "$rest"; fi
if [ "$unit" -ne 0 ]; then exit "$unit"; fi
# The tmp_path roots are the runs' own: a passing test's went at its end, the session fixtures'
# (built stores, the newer SQLite) go here. What else the run left in /tmp is a leak, measured below.
left_kb="$(du -sk "$tmp_root" | cut -f1)"
echo "=== the runs' tmp_path roots held $((left_kb / 1024)) MB at the end (session fixtures), removed ==="
rm -rf "$tmp_root"
tmp_after_kb="$(du -sk /tmp 2>/dev/null | cut -f1 || true)"
grew_mb=$(( (${tmp_after_kb:-0} - ${tmp_before_kb:-0}) / 1024 ))
echo "=== /tmp grew by $grew_mb MB during the run ==="
if [ "$grew_mb" -gt 1024 ]; then
  echo "test.sh: the passing run left $grew_mb MB more in /tmp outside its tmp_path roots (more than 1 GB); largest entries:" >&2
  du -sk /tmp/* 2>/dev/null | sort -n | tail -5 >&2
  exit 1
fi
