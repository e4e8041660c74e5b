"""Keeping secrets out of what fleetops shows and stores.

Variables are judged secret by name (as operators name them), because values
alone cannot tell a password from a hostname. A name is secret when one of its
words (split at `_`, `-`, `.`, digits and camelCase) is a secret word: password,
passphrase, passwd, secret, token, key, or a compound such as apikey or
authtoken; words that merely contain those letters (valkey, tokenizer, keys)
are not. Every non-empty scalar under such a name, whatever its type or length,
is a secret value, and so is what a template makes from one. A credential word its neighbour
makes another thing's name is not one (session_key, foreign_key_check, token_count: a schema's
column or index, a result field), nor is a schema object's name (idx_*, sqlite_autoindex_*). Output is scrubbed
of those values where they stand as values (not inside a longer word); names
(variables, hosts, groups, result fields) are never changed.
"""
from __future__ import annotations

import copy
import functools
import re

MASK = "********"
SECRET_NAMES = frozenset({"ansible_ssh_pass", "ansible_become_pass", "ansible_password",
                          "ansible_become_password", "fleetops_ssh_pass", "fleetops_become_pass"})
SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "secret", "secrets", "token", "key"})
COMPOUND_WORDS = frozenset({"apikey", "authkey", "accesskey", "privatekey", "secretkey", "signingkey",
                            "apitoken", "authtoken", "accesstoken", "refreshtoken", "clientsecret",
                            "apisecret"})

# `key` alone names the key of a mapping entry (dict2items, items2dict, with_dict's item.key,
# many JSON APIs), not a key that opens something: judged secret, every loop over a dict would
# scrub its keys (a profile named "default") from all output. ssh_key, api_key stay secret.
STRUCTURAL_NAMES = frozenset({"key"})

# A credential word next to one of these names something else: `key` a structural or public key
# (session_key, foreign_key_check, sort_key, host_key, key_lo), `token` a measure or a kind
# (token_count, token_limit, token_type). ssh_key, api_key, key2, auth_token stay secret.
KEY_QUALIFIERS_BEFORE = frozenset({"session", "foreign", "primary", "sort", "partition", "routing", "cache",
                                   "lookup", "unique", "idempotency", "dedup", "composite", "index", "row",
                                   "run", "group", "order", "join", "shard", "map", "dict", "host", "message",
                                   "object", "item", "entry", "record", "registry", "translation", "public"})
KEY_QUALIFIERS_AFTER = frozenset({"hi", "lo", "check", "checks", "checking", "range", "column", "columns",
                                  "field", "fields", "order", "prefix", "count", "counts", "type", "kind"})
TOKEN_QUALIFIERS_AFTER = frozenset({"count", "counts", "total", "totals", "usage", "limit", "limits", "budget",
                                    "length", "size", "estimate", "rate", "window", "type", "kind"})
# Schema object names (an index, SQLite's own objects) are names of a store, never of a credential
SCHEMA_PREFIXES = ("idx_", "sqlite_autoindex_", "sqlite_stat")

_PARTS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def _secret_part(part: str) -> bool:
    """A whole word, never a stem: `key` and `apikey`, not `valkey`, `keys` or `keyword`."""
    return part in SECRET_WORDS or part in COMPOUND_WORDS or part.endswith(("password", "passphrase"))


def is_secret_name(name) -> bool:
    """True for names like db_password, API_TOKEN, ssh_key, apiKey, ansible_ssh_pass (any case)."""
    if not isinstance(name, str):
        return False
    return _is_secret_str(name)


@functools.lru_cache(maxsize=8192)
def _is_secret_str(name: str) -> bool:
    # every task on every host asks about the same few hundred names: decide each once
    lowered = name.lower()
    if lowered in SECRET_NAMES:
        return True
    if lowered in STRUCTURAL_NAMES or lowered.startswith(SCHEMA_PREFIXES):
        return False
    parts = [p.lower() for p in _PARTS.findall(name)]
    return any(_secret_part(p) and not _qualified(parts, i) for i, p in enumerate(parts))


def _qualified(parts, i) -> bool:
    """A credential word its neighbour turns into another thing's name (KEY_/TOKEN_QUALIFIERS)."""
    before = parts[i - 1] if i else None
    after = parts[i + 1] if i + 1 < len(parts) else None
    if parts[i] == "key":
        return before in KEY_QUALIFIERS_BEFORE or after in KEY_QUALIFIERS_AFTER
    if parts[i] == "token":
        return after in TOKEN_QUALIFIERS_AFTER
    if parts[i] == "passwd":     # getent_passwd: the passwd database's entries (names, ids, homes)
        return before == "getent"
    return False


def _hides_something(value) -> bool:
    """None, "" and booleans hide nothing: a flag such as accept_new_host_keys=True is useful to see."""
    return value is not None and value != "" and not isinstance(value, bool)


def mask(obj):
    """A deep copy with every secret-named value replaced by MASK (the names are kept)."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            out[key] = MASK if is_secret_name(key) and _hides_something(value) else mask(value)
        return out
    if isinstance(obj, list):
        return [mask(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(mask(v) for v in obj)
    if isinstance(obj, (str, int, float, bool, type(None))):
        return obj
    return copy.deepcopy(obj)


def scalar_texts(value, out: set) -> None:
    """The text of every non-empty scalar in `value` (ints and floats as a template prints them)."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (str, int, float)):
        text = str(value)
        if text:
            out.add(text)
    elif isinstance(value, dict):
        for v in value.values():
            scalar_texts(v, out)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            scalar_texts(v, out)


# A secret-named variable that holds where a secret lives (ansible_ssh_private_key_file,
# vault_password_file) is masked by name, but its value is a path, not the secret: scrubbing it
# everywhere would blank the one thing an error about that file must say.
LOCATION_SUFFIXES = ("file", "_path", "_dir")


def is_location_name(name) -> bool:
    return isinstance(name, str) and name.lower().endswith(LOCATION_SUFFIXES)


def collect_secret_values(variables: dict, skip=frozenset()) -> set:
    """The text of every non-empty scalar held under a secret name, at any depth, to scrub from
    output (paths under `*file`/`*_path`/`*_dir` names excepted: they are masked by name only).
    Top-level names in `skip` are not looked into (the engine's magic variables: host and group
    names, which are names, and which a fleet makes as long as the fleet)."""
    found: set = set()

    def walk(value, depth=0):
        if depth > 100:
            return
        if isinstance(value, dict):
            for key, v in value.items():
                if is_secret_name(key) and is_location_name(key) and isinstance(v, str):
                    continue
                if is_secret_name(key):
                    scalar_texts(v, found)
                else:
                    walk(v, depth + 1)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, depth + 1)
    if skip:
        variables = {k: v for k, v in variables.items() if k not in skip}
    walk(variables)
    return found


def derived_values(templar, value, variables: dict, known: set) -> set:
    """What the `{{ … }}` expressions in `value` (nested args) make from a secret: each expression
    that names a secret variable, or a variable holding a known secret value, is rendered on its
    own, and its text is a secret too (`{{ db_password | b64encode }}` shows no db_password)."""
    found: set = set()
    for text in _template_strings(value):
        mine: set = set()
        for expr in _expressions(templar, text):
            if not _names_secret(expr[1], variables, known):
                continue
            try:
                scalar_texts(templar.render("{{" + expr[0] + "}}", variables), mine)
            except Exception:  # noqa: BLE001 - the task's own render reports the error
                continue
        if mine:
            found |= mine | _glued(templar, text, variables, mine)
    return found


def _glued(templar, text: str, variables: dict, values: set) -> set:
    """Words of the rendered `text` that hold a secret value glued to other text
    (`pw={{ pw }}x`): the value does not stand apart there, so the whole word is the secret."""
    try:
        rendered = templar.render(text, variables)
    except Exception:  # noqa: BLE001
        return set()
    if not isinstance(rendered, str):
        return set()
    out = set()
    for word in re.findall(r"\S+", rendered):
        if word not in values and any(v in word for v in values) and scrub(word, values) == word:
            out.add(word)
    return out


def _template_strings(value):
    """Strings with `{{` anywhere in nested args (keys included), without recursion."""
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, str):
            if "{{" in v:
                yield v
        elif isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, (list, tuple)):
            todo.extend(v)


@functools.lru_cache(maxsize=4096)
def _lexed(env, text: str) -> tuple:
    """((expression source, names and string literals in it), ...) for each `{{ … }}` of `text`.

    The names are what the expression reads (variables, attributes, subscripts): a filter's or a
    test's name and a keyword argument's (`items2dict(key_name='profile')`) are not data."""
    out = []
    try:
        tokens = list(env.lex(text))
    except Exception:  # noqa: BLE001 - a syntax error is the task render's to report
        return ()
    solid = [i for i, t in enumerate(tokens) if t[1] != "whitespace"]
    neighbours = {i: (tokens[solid[k - 1]][2] if k else None,
                      tokens[solid[k + 1]][2] if k + 1 < len(solid) else None) for k, i in enumerate(solid)}
    inside = False
    src: list = []
    names: list = []
    for i, (_, kind, val) in enumerate(tokens):
        if kind == "variable_begin":
            inside, src, names = True, [], []
        elif kind == "variable_end" and inside:
            inside = False
            out.append(("".join(src), tuple(names)))
        elif inside:
            src.append(val)
            before, after = neighbours.get(i, (None, None))
            if kind == "name" and before not in ("|", "is") and after != "=":
                names.append(val)
            elif kind == "string":
                names.append(val[1:-1])
    return tuple(out)


def _expressions(templar, text: str) -> tuple:
    return _lexed(templar.env, text)


def _names_secret(names, variables: dict, known: set) -> bool:
    for n in names:
        if is_secret_name(n) and not is_location_name(n):
            return True
        if known and n in variables:
            v = variables[n]
            if isinstance(v, (str, int, float)) and not isinstance(v, bool) and str(v) in known:
                return True
    return False


def _edge(value: str, start: bool) -> str:
    ch = value[0] if start else value[-1]
    if not (ch.isalnum() or ch == "_"):
        return ""
    return r"(?<![\w])" if start else r"(?![\w])"


@functools.lru_cache(maxsize=512)
def _pattern(values: frozenset):
    ordered = sorted(values, key=len, reverse=True)   # longest first, so overlaps go whole
    return re.compile("|".join(_edge(v, True) + re.escape(v) + _edge(v, False) for v in ordered))


def scrub(text: str, secret_values) -> str:
    """Replace each secret value by MASK where it stands as a value: not where it is only part
    of a longer word (a password `admin` leaves `admin_user` alone)."""
    if not text or not secret_values:
        return text
    values = frozenset(v for v in secret_values if isinstance(v, str) and v)
    if not values:
        return text
    return _pattern(values).sub(MASK, text)
