"""Hermes on the host: its paths and holders, the audit, and the repair and backup steps."""
