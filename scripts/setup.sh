#!/usr/bin/env bash
# Installs what fleetops needs on a fresh Debian/Ubuntu machine. Idempotent: each step checks
# before it installs. Sourced by test.sh (everything the tests call, and the .venv with the
# [test,docs] extras) and, with FLEETOPS_SETUP_FOR=demo, by demo.sh (only what the demo runs:
# sshd, sqlite3, Python's venv, procps and util-linux; demo.sh makes its own venv).
set -euo pipefail
FOR="${FLEETOPS_SETUP_FOR:-test}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FLEETOPS_VENV:-$ROOT/.venv}"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

missing=()
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
command -v ssh-keygen >/dev/null || missing+=(openssh-client)
command -v sqlite3 >/dev/null || missing+=(sqlite3)
command -v python3 >/dev/null || missing+=(python3)
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
# the system python runs the lab's Hermes processes (scripts/test.sh builds a venv on it)
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3 python3-venv)
command -v useradd >/dev/null || missing+=(passwd)
{ command -v pgrep && command -v ps; } >/dev/null || missing+=(procps)   # the lab and the holders are found with them
{ command -v flock && command -v unshare && command -v runuser; } >/dev/null || missing+=(util-linux)   # the run lock; the lab runs as its users
if [ "$FOR" = test ]; then   # below: only the tests and benchmarks call these
  command -v sudo >/dev/null || missing+=(sudo)                  # become tests (sudo -n)
  command -v crontab >/dev/null || missing+=(cron)               # the backup units' cron path
  command -v systemd-analyze >/dev/null || missing+=(systemd)    # `systemd-analyze verify` of the units
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)   # the PostgreSQL results store tests
  [ -x /usr/bin/redis-server ] || missing+=(redis-server)      # the broker of the Celery shard tests
  command -v chromium >/dev/null || missing+=(chromium)          # the report site, opened in a real headless browser
  command -v systemd-nspawn >/dev/null || missing+=(systemd-container)   # a host whose PID 1 is systemd (service/systemd tests)
  { command -v dnf && command -v rpmbuild && command -v createrepo_c; } >/dev/null || missing+=(dnf rpm createrepo-c)   # the dnf tests: an RPM repository and its client
  /usr/bin/python3 -c "import dnf" 2>/dev/null || missing+=(python3-dnf)   # ansible-core's dnf module, the oracle
  # the mixed lab hosts (tests/mixed): arm64 root under qemu user-mode, roots built by debootstrap
  if [ "${FLEETOPS_LAB_SKIP_MIXED:-0}" = 0 ]; then
    [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
    [ -x /usr/bin/qemu-aarch64-static ] || missing+=(qemu-user-static)
  fi
fi
if [ -n "${FLEETOPS_SETUP_DRY_RUN:-}" ]; then   # tests/test_setup.py: say what would be installed, do nothing
  echo "setup: would install: ${missing[*]:-nothing}"
  return 0 2>/dev/null || exit 0
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ "$FOR" = demo ]; then return 0 2>/dev/null || exit 0; fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  python3 -m venv "$VENV"
fi
stamp="$VENV/.fleetops-installed"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
  echo "setup: installing fleetops and its Python dependencies into $VENV"
  log="$VENV/fleetops-pip.log"
  if ! { "$VENV/bin/pip" install -q --upgrade pip && "$VENV/bin/pip" install -q -e "$ROOT[test,docs]"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "setup: pip install failed (full log: $log)" >&2
    exit 1
  fi
  touch "$stamp"
fi
export PATH="$VENV/bin:$PATH"
