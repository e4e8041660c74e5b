"""A bridged module's arguments, checked before any host is contacted from its own documented
options: the names (and aliases) it takes, the required ones, choices and types of the values
known before the run, with ansible-core's own type checkers (what the module converts on the
host). A templated value is the module's to judge when it runs."""
from __future__ import annotations

from fleetops.engine.module import Arg
from fleetops.errors import BadInput

# every type a YAML value has: fleetops' own check lets each through (spec.check decides)
ANY = (str, bool, int, float, list, dict)


def _is_template(value) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def args_of(options: dict) -> dict:
    """fleetops' `args` for a module's options: every name and alias, of any type (ansible-core
    converts on the host), none required here (an alias may stand for it: check() decides). An
    option named as ansible-core names a password (its PASSWORD_MATCH) is a secret."""
    from ansible.module_utils.basic import PASSWORD_MATCH
    out = {}
    for name, opt in options.items():
        opt = opt if isinstance(opt, dict) else {}
        secret = bool(opt.get("no_log")) or bool(PASSWORD_MATCH.match(name))
        for key in (name, *(opt.get("aliases") or ())):
            out[key] = Arg(type=ANY, secret=secret)
    return out


def _where(args, key: str, where: str) -> str:
    vw = getattr(args, "value_where", None)
    return (vw(key) or where) if vw else where


def _convert(kind: str, value):
    """The value as ansible-core's type checker for `kind` converts it; raises TypeError/ValueError."""
    from ansible.module_utils.common.parameters import DEFAULT_TYPE_VALIDATORS
    from ansible.module_utils.common.validation import check_type_str
    if kind in ("str", "path"):
        return check_type_str(value, allow_conversion=True)
    checker = DEFAULT_TYPE_VALIDATORS.get(kind)
    return value if checker is None else checker(value)


def _has_template(value) -> bool:
    if isinstance(value, dict):
        return any(_has_template(k) or _has_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_template(v) for v in value)
    return _is_template(value)


def check(module: str, options: dict, args, where: str) -> None:
    """BadInput for a required option not given (under any of its names), a value that is not
    of its option's type or not one of its choices."""
    for name, opt in options.items():
        opt = opt if isinstance(opt, dict) else {}
        names = (name, *(opt.get("aliases") or ()))
        given = [k for k in names if k in args]
        if opt.get("required") and not given:
            raise BadInput(f"module '{module}' needs argument '{name}'", where=where)
        for key in given:
            value = args[key]
            if value is None or _has_template(value):
                continue
            kind = opt.get("type") or "str"
            try:
                converted = _convert(kind, value) if isinstance(kind, str) else value
            except (TypeError, ValueError):
                raise BadInput(f"argument '{key}' of module '{module}' must be {kind}, not {value!r}",
                               where=_where(args, key, where)) from None
            choices = opt.get("choices")
            if isinstance(choices, dict):
                choices = list(choices)
            if choices:
                _choices(module, key, kind, opt, converted, list(choices), _where(args, key, where))


def _choices(module: str, key: str, kind: str, opt: dict, value, choices: list, where: str) -> None:
    values = value if kind == "list" and isinstance(value, list) else [value]
    if kind == "list" and opt.get("elements") in ("str", "path"):
        values = [str(v) if not isinstance(v, str) else v for v in values]
    for v in values:
        if v not in choices and str(v) not in [str(c) for c in choices]:
            raise BadInput(f"argument '{key}' of module '{module}' must be one of "
                           f"{', '.join(map(str, choices))}, not {v!r}", where=where)
