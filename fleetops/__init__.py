"""fleetops: run YAML playbooks over SSH across a fleet of Hermes hosts."""

__version__ = "0.1.0"
