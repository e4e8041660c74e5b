"""No product file over the line limit, except those pyproject.toml allows, each with its reason.

`[tool.fleetops.file_sizes]`: `limit`, and `allow` mapping a path to why it is long on purpose
(an entry without a reason, or for a file that no longer exists or is short, is an error too, so
the list cannot go stale). Run by scripts/lint.sh; prints each offender as one line and exits 1.
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]

try:
    import tomllib
except ModuleNotFoundError:   # Python < 3.11: pip's vendored reader is the same parser
    from pip._vendor import tomli as tomllib


def settings(pyproject: pathlib.Path = ROOT / "pyproject.toml") -> tuple:
    """(limit, {path: reason}) from pyproject.toml's [tool.fleetops.file_sizes]."""
    conf = tomllib.loads(pyproject.read_text())["tool"]["fleetops"]["file_sizes"]
    return int(conf["limit"]), dict(conf.get("allow") or {})


def offenders(root: pathlib.Path = ROOT) -> list:
    limit, allow = settings(root / "pyproject.toml")
    bad = []
    sizes = {}
    for p in sorted((root / "fleetops").rglob("*.py")):
        if p.is_symlink():
            continue
        rel = p.relative_to(root).as_posix()
        sizes[rel] = n = len(p.read_text().splitlines())
        if n > limit and rel not in allow:
            bad.append(f"file_sizes: {rel} has {n} lines (limit {limit}; split it, or allow it with its reason "
                       f"in pyproject.toml [tool.fleetops.file_sizes.allow])")
    for rel, why in sorted(allow.items()):
        if not str(why).strip():
            bad.append(f"file_sizes: pyproject.toml allows {rel} without a reason")
        elif sizes.get(rel, 0) <= limit:
            bad.append(f"file_sizes: pyproject.toml allows {rel}, which is "
                       f"{'not there' if rel not in sizes else f'{sizes[rel]} lines'}: drop the entry")
    return bad


def main() -> int:
    bad = offenders()
    if bad:
        print("\n".join(bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
