"""Keeping secrets out of what fleetops shows and stores.

Variables are judged secret by name (as operators name them), because values
alone cannot tell a password from a hostname. The CLI masks `fleetops hosts`,
and the results store, JSON output and logs scrub known secret values.
"""
from __future__ import annotations

import copy
import functools
import re

MASK = "********"
SECRET_NAMES = frozenset({"ansible_ssh_pass", "ansible_become_pass", "ansible_password",
                          "ansible_become_password", "fleetops_ssh_pass", "fleetops_become_pass"})
MIN_SCRUB_LENGTH = 4   # shorter values would scrub ordinary text everywhere


_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


def _secret_part(part: str) -> bool:
    """password/passphrase/secret anywhere in a word; token/key as a word or its ending
    (apikey, authtoken) but not as a plural or a stem (keys, tokens, tokenizer, keyword),
    so result fields such as distinct_keys or tokenizer are not hidden."""
    if any(w in part for w in ("password", "passphrase", "secret")):
        return True
    return part.endswith("token") or part.endswith("key")


def is_secret_name(name) -> bool:
    """True for names like db_password, API_TOKEN, ssh_key, apiKey, ansible_ssh_pass (any case)."""
    if not isinstance(name, str):
        return False
    return _is_secret_str(name)


@functools.lru_cache(maxsize=8192)
def _is_secret_str(name: str) -> bool:
    # every task on every host asks about the same few hundred names: decide each once
    if name.lower() in SECRET_NAMES:
        return True
    return any(_secret_part(p.lower()) for p in _PARTS.findall(name))


def mask(obj):
    """A deep copy with every secret-named value replaced by MASK.

    None, "" and booleans are left as they are: a flag such as
    accept_new_host_keys=True hides nothing and is useful to see.
    """
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if is_secret_name(key) and value is not None and value != "" and not isinstance(value, bool):
                out[key] = MASK
            else:
                out[key] = mask(value)
        return out
    if isinstance(obj, list):
        return [mask(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(mask(v) for v in obj)
    return copy.deepcopy(obj)


def _strings(value, out: set) -> None:
    if isinstance(value, str):
        if len(value) >= MIN_SCRUB_LENGTH:
            out.add(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _strings(v, out)


# A secret-named variable that holds where a secret lives (ansible_ssh_private_key_file,
# vault_password_file) is masked by name, but its value is a path, not the secret: scrubbing it
# everywhere would blank the one thing an error about that file must say.
LOCATION_SUFFIXES = ("file", "_path", "_dir")


def is_location_name(name) -> bool:
    return isinstance(name, str) and name.lower().endswith(LOCATION_SUFFIXES)


def collect_secret_values(variables: dict) -> set:
    """String values (len >= 4) held under secret names, at any depth, to scrub from output
    (paths under `*file`/`*_path`/`*_dir` names excepted: they are masked by name only)."""
    found: set = set()

    def walk(value):
        if isinstance(value, dict):
            for key, v in value.items():
                if is_secret_name(key) and is_location_name(key) and isinstance(v, str):
                    continue
                if is_secret_name(key):
                    _strings(v, found)
                else:
                    walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
    walk(variables)
    return found


def scrub(text: str, secret_values) -> str:
    """Replace every occurrence of each secret value by MASK (longest first, so overlaps go whole)."""
    if not text or not secret_values:
        return text
    for value in sorted((v for v in secret_values if v), key=len, reverse=True):
        text = text.replace(value, MASK)
    return text
