"""The engine: inventory, playbook, templating, executor, connection, results.

Nothing in this package knows about Hermes.
"""
