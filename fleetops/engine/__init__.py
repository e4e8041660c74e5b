"""The engine: inventory, playbook, templating, executor, connection, results.

Nothing in this package knows about Hermes.
"""
import sys as _sys

# paramiko.config imports invoke, when installed (fabric brings it), only to run ssh_config's
# `Match exec`; that import costs a run ~0.1 s of start-up. Keep it out of paramiko's import;
# engine/connection/sshconfig.py loads it when a config actually has `Match ... exec`.
if "paramiko" not in _sys.modules and "invoke" not in _sys.modules:
    _sys.modules["invoke"] = None  # type: ignore[assignment]  # makes `import invoke` raise ImportError
    try:
        import paramiko.config  # noqa: F401
    except ImportError:
        pass                               # no paramiko: the CLI reports it where it is needed
    finally:
        del _sys.modules["invoke"]
