"""Payload of the fetch module: the bytes of one host file, where SFTP cannot read it (become)."""
from fleetops.remote.host import files


def main(args):
    """{src}."""
    return files.run(args, files.slurp)
