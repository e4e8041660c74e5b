"""A payload's arguments as a playbook delivers them (a template renders to a string): one rule
for an on/off flag and one for a number with a default, for every payload."""


def flag(value):
    """True only for 1, true, yes, on, y (any case); a word it does not know is false."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "y")
    return bool(value)


def number(value, default, cast=float):
    """`cast(value)`, or `default` when the value is missing, empty or not a number."""
    if value is None or value == "":
        return default
    try:
        return cast(value)
    except (TypeError, ValueError):
        return default
