#!/usr/bin/env bash
# fleetops, end to end on one machine (run as root on a fresh Debian/Ubuntu; the README's first command):
#
#   bash scripts/demo.sh          a 6-host lab fleet (real sshd servers, one Unix user each) where
#                                 some hosts hold damaged Hermes stores under live Hermes processes;
#                                 audit (damage shown), the rolling repair play (live progress),
#                                 audit again (all healthy), and the central report
#   bash scripts/demo.sh down     stop the demo: holders by recorded PID, then the lab's sshd servers
#
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

step() { printf '\n\033[1;34m==> %s\033[0m\n' "$*"; }

down() {
  if [ -f "$REG" ] && [ -x "${VENV:-$ROOT/.venv}/bin/python" ]; then
    "${VENV:-$ROOT/.venv}/bin/python" scripts/demo_seed.py --lab "$LAB" --prefix "$PREFIX" --registry "$REG" --down || true
  fi
  if [ -f "$LAB/lab.json" ] && command -v fleetops >/dev/null 2>&1; then
    fleetops lab down --dir "$LAB" --prefix "$PREFIX" || true
  elif [ -f "$LAB/lab.json" ] && [ -x "${VENV:-$ROOT/.venv}/bin/fleetops" ]; then
    "${VENV:-$ROOT/.venv}/bin/fleetops" lab down --dir "$LAB" --prefix "$PREFIX" || true
  fi
}

if [ "${1:-}" = down ]; then
  export PATH="${FLEETOPS_VENV:-$ROOT/.venv}/bin:$PATH"
  VENV="${FLEETOPS_VENV:-$ROOT/.venv}"
  down
  echo "demo: stopped (the lab users and ./$DEMO stay; re-run bash scripts/demo.sh to start fresh)"
  exit 0
fi

started=$(date +%s)
step "installing what the demo needs (system packages, the fleetops venv, the hermes-agent venv)"
# shellcheck source=setup.sh
source scripts/setup.sh
HV="$(bash scripts/hermes-venv.sh)"
# the lab users run Hermes from that venv: its interpreter must be reachable by them (a python3
# under /root, e.g. pyenv, is not), else build one on the system python
if ! runuser -u nobody -- "$HV/bin/python" -c '' >/dev/null 2>&1; then
  HV="$(PYTHON=/usr/bin/python3 FLEETOPS_HERMES_VENV=/opt/fleetops-test/hermes-venv-shared bash scripts/hermes-venv.sh)"
fi
export FLEETOPS_LAB_HERMES_VENV="$HV" FLEETOPS_HERMES_VENV="$HV"

APP_VENV="${FLEETOPS_DEMO_VENV:-$ROOT/.demo-venv}"
step "building a wheel of fleetops and installing it into its own venv ($APP_VENV): the demo runs what an operator installs"
wheel_dir="$(mktemp -d)"
"$VENV/bin/python" -m pip wheel -q --no-deps -w "$wheel_dir" "$ROOT" >/dev/null
[ -x "$APP_VENV/bin/python" ] || python3 -m venv "$APP_VENV"
"$APP_VENV/bin/pip" install -q --force-reinstall "$wheel_dir"/fleetops-*.whl >/dev/null
rm -rf "$wheel_dir" "$ROOT/build"
fleetops() { "$APP_VENV/bin/fleetops" "$@"; }
fleetops --version

step "starting fresh in ./$DEMO"
down
rm -rf "$DEMO"
mkdir -p "$DEMO"

step "fleetops lab up 6: six sshd hosts on 127.0.0.1, one Unix user each"
fleetops lab up 6 --dir "$LAB" --prefix "$PREFIX"
INV="$LAB/inventory.yml"

step "seeding Hermes stores (some damaged) under live Hermes processes, as each host's user"
python3 scripts/demo_seed.py --lab "$LAB" --prefix "$PREFIX" --registry "$REG"

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

took=$(( $(date +%s) - started ))
step "done in ${took}s"
cat <<EOF
central results:   $ROOT/$RUNS/runs.db (every run, task and host result; fleetops report --list --results $RUNS)
per-host evidence: $ROOT/$RUNS/<run-id>/<host>/hermes/<profile>/ (snapshot and quarantine manifests,
                   repair and salvage reports, verify results)
on each host:      ~/.hermes/fleetops/{snapshots,quarantine}/ (the damaged originals, sha256 in manifest.json)
the installed tool: $APP_VENV/bin/fleetops (fleetops playbooks lists what it bundles)
undo one host:     $APP_VENV/bin/fleetops run rollback -i $INV -l lab03 --results $RUNS
stop the demo:     bash scripts/demo.sh down
EOF
