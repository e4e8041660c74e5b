"""Payload: answer `data` back (ansible.builtin.ping); `crash` raises, as Ansible's does."""
from __future__ import annotations


def main(args: dict) -> dict:
    data = args.get("data", "pong")
    if data == "crash":
        raise Exception("boom")
    return {"changed": False, "failed": False, "skipped": False, "msg": "", "ping": data}
