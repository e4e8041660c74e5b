"""Reaching a host: the transport contract and its SSH and local implementations, become,
~/.ssh/config lookups and the per-host run lock.

Everything here knows hosts and commands, nothing of playbooks or Hermes.
"""
