"""Payload of the hermes_quarantine module: copy the three-file image aside before any change."""
from fleetops.remote.hermes import image_swap


def main(args):
    """{hermes_home?, profile?, force?, run_id?, _check?}."""
    return image_swap.run(args, "quarantine")
