"""Payload of the copy module: make a host file hold the given bytes and attributes."""
from fleetops.remote.host import files


def main(args):
    """{dest, content_b64, basename?, mode?, owner?, group?, backup?, force?, _check?, _diff?}."""
    return files.run(args, files.copy)
