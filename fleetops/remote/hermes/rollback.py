"""Payload of the hermes_rollback module: put the quarantined original back exactly."""
from fleetops.remote.hermes import image_swap


def main(args):
    """{hermes_home?, profile?, quarantine_dir?, force?, run_id?, _check?}."""
    return image_swap.run(args, "rollback")
