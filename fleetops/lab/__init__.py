"""`fleetops lab`: a local demo/test fleet of real OpenSSH servers on 127.0.0.1."""
from fleetops.lab.errors import LabError
from fleetops.lab.lab import Lab

__all__ = ["Lab", "LabError"]
