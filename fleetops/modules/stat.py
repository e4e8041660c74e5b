"""`stat`: what is at a path on the host (`stat.exists`, `isdir`, `mode`, `size`, `checksum`, ...),
in ansible.builtin.stat's return shape, so `when: x.stat.exists` reads the same."""
from __future__ import annotations

from fleetops.engine.module import Arg, Module, TaskContext

ALGORITHMS = ("md5", "sha1", "sha224", "sha256", "sha384", "sha512")


class Stat(Module):
    name = "stat"
    args = {
        "path": Arg(str, required=True),
        "follow": Arg(bool, default=False),
        "get_checksum": Arg(bool, default=True),
        "checksum_algorithm": Arg(str, default="sha1", choices=ALGORITHMS),
        "get_mime": Arg(bool, default=True),
    }

    def run(self, ctx: TaskContext, args: dict) -> dict:
        return ctx.payload("stat", {k: args.get(k) for k in self.args})
