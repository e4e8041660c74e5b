"""Payload of the hermes_stop_writers module: stop every writer of one profile's state.db."""
from fleetops.remote.hermes import writers


def main(args):
    """{hermes_home?, profile?, quiet_window?, deadline?, grace?, force?, hermes_bin?, systemd?,
    restart_on_failure?, fence?, fence_ttl?, run_id?, _check?}."""
    return writers.run(args, "stop")
