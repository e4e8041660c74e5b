"""The lab's one error, shared by every part of it."""
from fleetops.errors import FleetopsError


class LabError(FleetopsError):
    """The lab could not be brought up or down (not root, sshd missing, port trouble)."""

    exit_code = 1
