"""A payload's arguments as a playbook delivers them (a template renders to a string): one rule
for an on/off flag and one for a number with a default, for every payload.

The flag rule is ansible-core's word set (module_utils/parsing/convert_bool.py), the same the
controller reads in fleetops/engine/boolean.py: host code imports nothing of the engine."""

TRUE_WORDS = frozenset({"y", "yes", "on", "1", "true", "t"})


def flag(value):
    """True for True, 1, or y, yes, on, 1, true, t (any case, spaces stripped); anything else is false."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value == 1
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    return isinstance(value, str) and value.strip().lower() in TRUE_WORDS


def number(value, default, cast=float):
    """`cast(value)`, or `default` when the value is missing, empty or not a number."""
    if value is None or value == "":
        return default
    try:
        return cast(value)
    except (TypeError, ValueError):
        return default
