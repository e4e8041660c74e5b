"""Payload of the hermes_hostlock module: the run's lease in <hermes home>/fleetops/lock."""
import os

from fleetops.remote.host import hostlock


def lock_path(hermes_home=None):
    """The lock file of a Hermes home (default ~/.hermes), the one every repair step takes."""
    root = os.path.abspath(os.path.expanduser(hermes_home)) if hermes_home else \
        os.path.expanduser(os.path.join("~", ".hermes"))
    return os.path.join(root, "fleetops", "lock")


def main(args):
    """{action: acquire|release|status, run_id, path? | hermes_home?, ttl?, wait?, purpose?, _check?}."""
    args = args or {}
    return hostlock.lease(args, args.get("path") or lock_path(args.get("hermes_home")))
