"""Payload of the hermes_start_writers module: bring back what hermes_stop_writers stopped."""
from fleetops.remote.hermes import writers


def main(args):
    """{hermes_home?, profile?, wait_timeout?, systemd?, run_id?, _check?}."""
    return writers.run(args, "start")
