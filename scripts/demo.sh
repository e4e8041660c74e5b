#!/usr/bin/env bash
# fleetops, end to end on one machine (run as root on a fresh Debian/Ubuntu; the README's first command):
#
#   bash scripts/demo.sh          a 6-host lab fleet (real sshd servers, one Unix user each) where
#                                 some hosts hold damaged Hermes stores under live Hermes processes;
#                                 audit (damage shown), the rolling repair play (live progress),
#                                 audit again (all healthy), and the central report
#   bash scripts/demo.sh down     stop the demo: holders by recorded PID, then the lab's sshd servers
#
# Installs only what it runs (scripts/setup.sh with FLEETOPS_SETUP_FOR=demo; the test suite's
# extras are scripts/test.sh's) and prints how long each step took.
# Idempotent: running it again stops the previous demo and starts fresh in ./fleetops-demo.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
DEMO="fleetops-demo"
LAB="$DEMO/lab"
PREFIX="${FLEETOPS_DEMO_PREFIX:-fodemo}"
REG="$DEMO/holders.json"
RUNS="$DEMO/runs"

if [ "$(id -u)" != 0 ]; then
  echo "demo: run as root (the lab creates one Unix user per host and runs sshd servers)" >&2
  exit 1
fi

down() {
  if [ -f "$REG" ] && [ -x "$VENV/bin/python" ]; then
    "$VENV/bin/python" scripts/demo_seed.py --lab "$LAB" --prefix "$PREFIX" --registry "$REG" --down || true
  fi
  if [ -f "$LAB/lab.json" ] && [ -x "$VENV/bin/fleetops" ]; then
    "$VENV/bin/fleetops" lab down --dir "$LAB" --prefix "$PREFIX" || true
  fi
}

if [ "${1:-}" = down ]; then
  VENV="${FLEETOPS_DEMO_VENV:-$ROOT/.demo-venv}"
  down
  echo "demo: stopped (the lab users and ./$DEMO stay; re-run bash scripts/demo.sh to start fresh)"
  exit 0
fi

started=$(date +%s)
step_started=$started
timings=()
# Each step prints how long the one before it took; the summary at the end lists them all.
step() {
  local now; now=$(date +%s)
  if [ -n "${step_name:-}" ]; then
    timings+=("$(printf '%5ss  %s' $(( now - step_started )) "$step_name")")
    printf '\033[2m    (%ss)\033[0m\n' $(( now - step_started ))
  fi
  step_name="$1"; step_started=$now
  printf '\n\033[1;34m==> %s\033[0m\n' "$*"
}
# On any exit, the steps' times so far (a failed step shows how far the demo got).
timings_on_exit() {
  local rc=$? now; now=$(date +%s)
  [ "$rc" = 0 ] || { [ -n "${step_name:-}" ] && timings+=("$(printf '%5ss  %s (exit %s)' $(( now - step_started )) "$step_name" "$rc")"); }
  printf '\nsteps:\n'; printf '%s\n' "${timings[@]}"; printf '%5ss  in all\n' $(( now - started ))
}
trap timings_on_exit EXIT

step "system packages the demo runs: openssh-server, sqlite3, python3-venv (only what is missing)"
# shellcheck source=setup.sh
FLEETOPS_SETUP_FOR=demo source scripts/setup.sh

step "the hermes-agent venv the demo hosts run (real Hermes gateways hold the stores)"
HV="$(bash scripts/hermes-venv.sh)"
# the lab users run Hermes from that venv: its interpreter must be reachable by them (a python3
# under /root, e.g. pyenv, is not), else build one on the system python
if ! runuser -u nobody -- "$HV/bin/python" -c '' >/dev/null 2>&1; then
  HV="$(PYTHON=/usr/bin/python3 FLEETOPS_HERMES_VENV=/opt/fleetops-test/hermes-venv-shared bash scripts/hermes-venv.sh)"
fi
export FLEETOPS_LAB_HERMES_VENV="$HV" FLEETOPS_HERMES_VENV="$HV"

VENV="${FLEETOPS_DEMO_VENV:-$ROOT/.demo-venv}"
step "pip install . into its own venv ($VENV): the demo runs what an operator installs"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" uninstall -q -y fleetops >/dev/null 2>&1 || true   # this checkout's files, also at the same version
"$VENV/bin/pip" install -q --disable-pip-version-check "$ROOT" >/dev/null
rm -rf "$ROOT/build"
export PATH="$VENV/bin:$PATH"
fleetops --version

step "starting fresh in ./$DEMO"
down
rm -rf "$DEMO"
mkdir -p "$DEMO"

step "fleetops lab up 6: six sshd hosts on 127.0.0.1, one Unix user each"
fleetops lab up 6 --dir "$LAB" --prefix "$PREFIX"
INV="$LAB/inventory.yml"

step "seeding Hermes stores (some damaged) under live Hermes processes, as each host's user"
"$VENV/bin/python" scripts/demo_seed.py --lab "$LAB" --prefix "$PREFIX" --registry "$REG"

step "fleetops audit: read-only health audit of the fleet (exit 5 = damaged stores found)"
set +e
fleetops audit -i "$INV" --results "$RUNS"
rc=$?
set -e
[ "$rc" = 5 ] || { echo "demo: expected the audit to find damage (exit 5), got exit $rc" >&2; exit 1; }

step "fleetops run repair: canary, then batches; stop writers, quarantine, repair, swap, restart, verify"
fleetops run repair -i "$INV" --results "$RUNS" \
  -e "hermes_bin=$HV/bin/hermes" -e stop_quiet_window=5 -e stop_grace=5

step "fleetops audit again: every store healthy (exit 0)"
fleetops audit -i "$INV" --results "$RUNS"

step "fleetops report latest --audit: the central record of the last run"
fleetops report latest --audit --results "$RUNS"

step "done"
cat <<EOF
central results:   $ROOT/$RUNS/runs.db (every run, task and host result; fleetops report --list --results $RUNS)
per-host evidence: $ROOT/$RUNS/<run-id>/<host>/hermes/<profile>/ (snapshot and quarantine manifests,
                   repair and salvage reports, verify results)
on each host:      ~/.hermes/fleetops/{snapshots,quarantine}/ (the damaged originals, sha256 in manifest.json)
the installed tool: $VENV/bin/fleetops (fleetops playbooks lists what it bundles)
undo one host:     $VENV/bin/fleetops run rollback -i $INV -l lab03 --results $RUNS
stop the demo:     bash scripts/demo.sh down
EOF
