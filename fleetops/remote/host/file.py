"""Payload of the file module: a path's state (directory, absent, touch, file) and attributes."""
from fleetops.remote.host import files


def main(args):
    """{path, state?, mode?, owner?, group?, force?, _check?, _diff?}."""
    return files.run(args, files.file_state)
