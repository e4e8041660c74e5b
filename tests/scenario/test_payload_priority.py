"""Payloads at low priority unless a play or inventory variable says not: the whole tool, run
on the controller (ansible_connection=local) so the payload is a real process of this machine."""
from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_play_or_inventory_variable_turns_low_priority_off(tmp_path):
    """fleetops_low_priority from the inventory (host h2), from the play (second play), and a bad
    value refused by the task with the variable's name."""
    (tmp_path / "inv.ini").write_text("h1 ansible_connection=local\n"
                                      "h2 ansible_connection=local fleetops_low_priority=false\n")
    (tmp_path / "pb.yml").write_text(textwrap.dedent("""
        - hosts: all
          gather_facts: false
          tasks:
            - ping:
              register: p
            - assert:
                that: "p.host_priority.lowered == (inventory_hostname == 'h1')"
            - assert:
                that: "p.host_priority.nice >= 10 and p.host_priority.io_class == 'idle'"
              when: inventory_hostname == 'h1'
        - hosts: h1
          gather_facts: false
          vars:
            fleetops_low_priority: "{{ 'no' }}"
          tasks:
            - ping:
              register: p
            - assert:
                that: "not p.host_priority.lowered"
        - hosts: h1
          gather_facts: false
          vars:
            fleetops_low_priority: maybe
          tasks:
            - ping:
        """))
    proc = subprocess.run([sys.executable, "-m", "fleetops", "run", "pb.yml", "-i", "inv.ini", "--results", "runs"],
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "variable 'fleetops_low_priority' must be true or false, got 'maybe'" in out, out
    # every assert passed: the one failed task is the bad value's
    assert [ln.split()[1] for ln in out.splitlines() if ln.startswith("  failed ")] == ["h1"], out
