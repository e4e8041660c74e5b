"""The holder's argv, read back in one place: a real process labelled as the lock command labels
its holder is found in the account's real `ps` output, its record read; other lines give none."""
from __future__ import annotations

import json
import subprocess

from fleetops.engine.connection.runlock import PS_HOLDERS, TAG, describe, holder_in_args, holder_record


def test_a_live_holder_is_found_in_ps_and_its_record_read():
    record = holder_record("run-ps-1")
    holder = subprocess.Popen(["sh", "-c", 'exec cat - "$0" "$1" >/dev/null 2>&1', TAG,
                               json.dumps(record, separators=(",", ":"))], stdin=subprocess.PIPE)
    try:
        out = subprocess.run(["sh", "-c", PS_HOLDERS], capture_output=True, text=True, check=True).stdout
        found = [r for r in map(holder_in_args, out.splitlines()) if r]
        assert record in found
        assert describe(record).startswith("run run-ps-1, ")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_line_that_is_not_a_holders_gives_no_record():
    assert holder_in_args("") == {}
    assert holder_in_args("/usr/sbin/sshd -D") == {}
    assert holder_in_args(f"cat - {TAG} {{not json") == {}
    assert holder_in_args(f"cat - {TAG} [1, 2]") == {}
    assert holder_in_args(f'python3 -I -S -c x {TAG} {{"run_id": "r"}}') == {"run_id": "r"}
