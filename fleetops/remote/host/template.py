"""Payload of the template module: write the rendered template as the copy payload writes a file."""
from fleetops.remote.host import files


def main(args):
    """{dest, content_b64, basename?, mode?, owner?, group?, backup?, force?, _check?, _diff?}."""
    return files.run(args, files.copy)
