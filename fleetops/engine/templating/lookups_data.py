"""The lookups of ansible.builtin that read or make data: sequence, csvfile, ini, password, config.

Each behaves as ansible-core's plugin of the same name on the same terms and options.
"""
from __future__ import annotations

import configparser
import csv
import io
import os
import random
import re
import string

from fleetops.engine.boolean import boolean
from fleetops.engine.templating.lookups import LOOKUPS, LookupError_, kv_term

_SHORTCUT = re.compile(r"^((?:0[xX])?[0-9a-fA-F]+-)?((?:0[xX])?[0-9a-fA-F]+)(/(?:0[xX])?[0-9a-fA-F]+)?(:(.+))?$")


def _int(v) -> int:
    """ansible-core 2.19 takes decimal integers only (0x0a is refused)."""
    if not re.fullmatch(r"\s*-?\d+\s*", str(v)):
        raise LookupError_(f"a setting has an invalid value: Invalid value provided for 'integer': {str(v)!r}")
    return int(str(v))


def _sequence(terms, env, start=None, end=None, count=None, stride=None, format=None):
    out = []
    given = any(v is not None for v in (start, end, count, stride, format))
    for term in terms or ([""] if given else []):      # no terms and no options: no items
        opts = {"start": start, "end": end, "count": count, "stride": stride, "format": format}
        text = str(term).strip()
        if text:
            m = _SHORTCUT.match(text)
            if m and "=" not in text:
                first, last, step, _, fmt = m.groups()
                if first:
                    opts["start"] = first[:-1]
                opts["end"] = last
                if step:
                    opts["stride"] = step[1:]
                if fmt:
                    opts["format"] = fmt
            else:
                for word in text.split():
                    k, sep, v = word.partition("=")
                    if not sep or k not in opts:
                        raise LookupError_(f"unrecognized arguments to with_sequence: {text!r}")
                    if k != "format" and not re.fullmatch(r"-?\d+", v):
                        raise LookupError_(f"Config '{k}' for 'sequence' lookup has an invalid value: Invalid value provided for 'integer': {v!r}")
                    opts[k] = v
        try:
            first = _int(opts["start"]) if opts["start"] is not None else 1
            step = _int(opts["stride"]) if opts["stride"] is not None else 1
            if opts["count"] is not None and opts["end"] is not None:
                raise LookupError_("can't specify both count and end in with_sequence")
            if opts["count"] is not None:
                count = _int(opts["count"])
                if count == 0:                  # ansible-core: no items, not an error
                    continue
                last = first + count * step - 1 if count else first - step
            elif opts["end"] is not None:
                last = _int(opts["end"])
            else:
                raise LookupError_("must specify count or end in with_sequence")
        except ValueError as exc:
            raise LookupError_(f"can't parse arg to with_sequence: {exc}") from None
        fmt = opts["format"] or "%d"
        try:
            fmt % 0
        except (ValueError, TypeError):
            raise LookupError_(f"bad formatting string: {fmt}") from None
        if step > 0 and last < first:
            raise LookupError_("to count backwards make stride negative")
        if step < 0 and last > first:
            raise LookupError_("to count forward don't make stride negative")
        if step == 0:
            continue
        stop = last + (1 if step > 0 else -1)
        for i in range(first, stop, step):
            try:
                out.append(fmt % i)
            except (ValueError, TypeError):
                raise LookupError_(f"problem formatting {i!r} with {fmt!r}") from None
    return out


def _csvfile(terms, env, file="ansible.csv", col="1", default=None, delimiter="TAB", encoding="utf-8",
             keycol="0"):
    out = []
    for term in terms:
        key, params = kv_term(term, ("file", "col", "default", "delimiter", "encoding", "keycol"))
        f = params.get("file", file)
        delim = params.get("delimiter", delimiter)
        delim = "\t" if delim in ("TAB", "\\t", "\t") else delim
        path = env.find("files", f)
        col_i, key_i = int(params.get("col", col)), int(params.get("keycol", keycol))
        found = params.get("default", default)
        with open(path, newline="", encoding=params.get("encoding", encoding)) as fh:
            for row in csv.reader(fh, delimiter=delim):
                if row and len(row) > key_i and row[key_i] == key:
                    if col_i >= len(row):
                        raise LookupError_(f"csvfile: column {col_i} out of range in {f}")
                    found = row[col_i]
                    break
        out.append(found)
    return out


def _ini(terms, env, file="ansible.ini", section="global", re=False, type="ini", default="",
         encoding="utf-8", case_sensitive=False, allow_no_value=False, interpolation=True):
    import re as _re
    out = []
    for term in terms:
        key, params = kv_term(term, ("file", "section", "re", "type", "default", "encoding",
                                      "case_sensitive", "allow_no_value"))
        opts = {"file": file, "section": section, "re": re, "type": type, "default": default,
                "encoding": encoding, "case_sensitive": case_sensitive, "allow_no_value": allow_no_value}
        opts.update(params)
        path = env.find("files", opts["file"])
        with open(path, encoding=opts["encoding"]) as fh:
            text = fh.read()
        sect = opts["section"]
        if opts["type"] == "properties":
            text, sect = "[java_properties]\n" + text, "java_properties"
        cp = (configparser.ConfigParser(allow_no_value=boolean(opts["allow_no_value"], strict=False))
              if boolean(interpolation, strict=False) else configparser.RawConfigParser(allow_no_value=boolean(opts["allow_no_value"], strict=False)))
        if boolean(opts["case_sensitive"], strict=False):
            cp.optionxform = str  # type: ignore[assignment,method-assign]
        cp.read_file(io.StringIO(text))
        if boolean(opts["re"], strict=False):
            rx = _re.compile(key)
            out.extend(v for k, v in cp.items(sect) if rx.match(k))
            continue
        try:
            out.append(cp.get(sect, key))
        except configparser.NoSectionError:
            raise LookupError_(f"No section {sect!r} in {opts['file']}") from None
        except configparser.NoOptionError:
            out.append(opts["default"])
    return out


_CHARS = {"ascii_letters": string.ascii_letters, "digits": string.digits, "punctuation": string.punctuation,
          "ascii_lowercase": string.ascii_lowercase, "ascii_uppercase": string.ascii_uppercase,
          "hexdigits": string.hexdigits, "octdigits": string.octdigits}


def _password(terms, env, length=20, chars=None, encrypt=None, seed=None, ident=None):
    out = []
    for term in terms:
        path, params = kv_term(term, ("length", "chars", "encrypt", "seed", "ident"))
        if params.get("encrypt", encrypt):
            raise LookupError_("password: 'encrypt' is not supported by fleetops (no passlib hashing)")
        n = int(params.get("length", length))
        names = params.get("chars", chars) or ["ascii_letters", "digits", ".,:-_"]
        if isinstance(names, str):
            names = names.split(",")
        pool = "".join(_CHARS.get(c, c) for c in names)
        if path != "/dev/null" and not os.path.isabs(path):
            path = os.path.join(env.search_dirs()[-1], path)
        if path != "/dev/null" and os.path.exists(path):
            with open(path) as fh:
                out.append(fh.read().rstrip("\n").split(" salt=")[0])
            continue
        rng = random.Random(params.get("seed", seed)) if params.get("seed", seed) is not None else random.SystemRandom()
        pw = "".join(rng.choice(pool) for _ in range(n))
        if path != "/dev/null":
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(pw + "\n")
        out.append(pw)
    return out


# ansible-core's configuration defaults the config lookup is asked for in playbooks
CONFIG_DEFAULTS = {
    "DEFAULT_ROLES_PATH": ["~/.ansible/roles", "/usr/share/ansible/roles", "/etc/ansible/roles"],
    "DEFAULT_TIMEOUT": 10, "DEFAULT_FORKS": 5, "DEFAULT_REMOTE_USER": None,
    "DEFAULT_BECOME_USER": "root", "DEFAULT_BECOME_METHOD": "sudo", "DEFAULT_HASH_BEHAVIOUR": "replace",
    "DEFAULT_JINJA2_NATIVE": False, "DEFAULT_KEEP_REMOTE_FILES": False, "DEFAULT_POLL_INTERVAL": 15,
    "ANY_ERRORS_FATAL": False, "DEFAULT_PRIVATE_ROLE_VARS": False, "DEFAULT_GATHERING": "implicit",
    "RETRY_FILES_ENABLED": False, "HOST_KEY_CHECKING": True, "DEFAULT_MANAGED_STR": "Ansible managed",
    "COLOR_OK": "green", "COLOR_CHANGED": "yellow", "COLOR_ERROR": "red", "COLOR_SKIP": "cyan",
    "DEFAULT_UNDEFINED_VAR_BEHAVIOR": True, "INJECT_FACTS_AS_VARS": True,
}


def _config(terms, env, on_missing="error", plugin_type=None, plugin_name=None, show_origin=False):
    if on_missing not in ("error", "warn", "skip"):
        raise LookupError_(f'"on_missing" must be a string and one of "error", "warn" or "skip", not {on_missing}')
    if (plugin_type is None) != (plugin_name is None):
        raise LookupError_("Both plugin_type and plugin_name are required, cannot use one without the other")
    if plugin_type is not None:
        raise LookupError_("config: plugin settings are not known to fleetops")
    out = []
    for term in terms:
        if not isinstance(term, str):
            raise LookupError_(f"Invalid setting identifier, {term!r} is not a string, its a {type(term)}")
        if term not in CONFIG_DEFAULTS:
            if on_missing == "error":
                raise LookupError_(f"Unable to find setting {term}")
            continue
        out.append([CONFIG_DEFAULTS[term], "default"] if show_origin else CONFIG_DEFAULTS[term])
    return out


LOOKUPS.update(sequence=_sequence, csvfile=_csvfile, ini=_ini, password=_password, config=_config)
