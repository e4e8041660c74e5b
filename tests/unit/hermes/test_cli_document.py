"""`fleetops audit --json` writes its document host by host: the same JSON one dumps call gives."""
from __future__ import annotations

import io
import json

from fleetops.hermes.cli import write_document


def test_the_document_written_host_by_host_is_the_whole_document():
    head = {"run_id": "r1", "exit_code": 0, "healthy": True, "databases": [{"host": "a\"b", "verdict": "healthy"}]}
    hosts = {"web1": {"msg": "ünïcode", "n": 1}, "db\"2": {"failed": True, "msg": "password=hunter2"}}
    out = io.StringIO()
    write_document(out, head, hosts, lambda r: {k: ("***" if "hunter2" in str(v) else v) for k, v in r.items()})
    got = json.loads(out.getvalue())
    assert got == dict(head, hosts={"web1": hosts["web1"], "db\"2": {"failed": True, "msg": "***"}})
    assert out.getvalue().endswith("}\n") and out.getvalue().count("\n") == 1
    empty = io.StringIO()
    write_document(empty, {}, {}, lambda r: r)
    assert json.loads(empty.getvalue()) == {"hosts": {}}
