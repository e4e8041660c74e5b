"""What may be shown or stored: secret values scrubbed, secret-named keys masked, terminal
control characters escaped.

The live view, the --json output, the results store and error lines all pass through here, so
a secret is hidden the same way wherever it would have appeared.
"""
from __future__ import annotations

import dataclasses
import re

from fleetops.engine import secrets as _secrets


def scrub_text(text, values) -> str:
    """Replace every known secret value in a string."""
    if not isinstance(text, str) or not values:
        return text
    return _secrets.scrub(text, values)


# C0 controls but tab/newline, DEL and C1 controls: a host's output or a hostile inventory must not
# reach the operator's terminal as escape sequences (retitle, clear screen, fake lines).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with terminal control characters shown as \\xNN instead of acted on (for terminals)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _deep_scrub(obj, values):
    if isinstance(obj, str):
        return scrub_text(obj, values)
    if isinstance(obj, dict):
        return {k: _deep_scrub(v, values) for k, v in obj.items()}   # names are never changed
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [_deep_scrub(v, values) for v in obj]
    return obj


def clean(obj, values=frozenset()):
    """Scrub every string and mask secret-named keys: what may be shown or stored."""
    return _secrets.mask(_deep_scrub(obj, values))


def clean_per_host(by_host, values=frozenset()) -> dict:
    """Clean a {host: value} mapping: host names are names, not values under a secret name."""
    return {h: clean(v, values) for h, v in (by_host or {}).items()}


def clean_options(options, values=frozenset()) -> dict:
    """Clean run options value by value: their names are fleetops' own, never secrets."""
    if dataclasses.is_dataclass(options) and not isinstance(options, type):
        options = dataclasses.asdict(options)
    elif options is not None and not isinstance(options, dict):
        options = dict(vars(options)) if hasattr(options, "__dict__") else {"options": str(options)}
    out = {}
    for k, v in (options or {}).items():
        if k == "extra_vars" or isinstance(v, (dict, list, tuple, set, frozenset)):
            out[str(k)] = clean(v, values)
        else:
            out[str(k)] = _deep_scrub(v, values)
    return out
