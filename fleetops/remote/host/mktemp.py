"""Payload of the tempfile module: a new private file or directory (mkstemp/mkdtemp: 0600/0700,
a random name no other process can have taken), as ansible.builtin.tempfile makes it. Named
mktemp because a module named tempfile would shadow the standard library's."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Dict

from fleetops.remote.host.contract import result
from fleetops.remote.host.fileattrs import path_info


def main(args: Dict[str, Any]) -> Dict[str, Any]:
    """{state?: file|directory, path?, prefix?, suffix?}."""
    prefix = "ansible." if args.get("prefix") is None else str(args["prefix"])
    suffix = str(args.get("suffix") or "")
    for name, value in (("prefix", prefix), ("suffix", suffix)):
        if value and value != os.path.basename(value):
            return result(failed=True, msg="%s must be a valid file name component, got %r" % (name, value))
    where = args.get("path") or None
    if where:
        where = os.path.expanduser(os.path.expandvars(str(where)))
    try:
        if (args.get("state") or "file") == "directory":
            path = tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=where)
        else:
            fd, path = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=where)
            os.close(fd)
    except OSError as e:
        return result(failed=True, msg="%s: %s" % (e.strerror or e, e.filename or where))
    out = result(changed=True, msg="created %s" % path, path=path)
    out.update(path_info(path))
    return out
