"""No product file over 600 lines, except those README "Code layout" names with the reason.

Run by scripts/lint.sh; prints each offender as one line and exits 1.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 600


def allowed() -> set:
    """The files README's "Code layout" section lists as long on purpose (`path`, N lines: why)."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Code layout", 1)[-1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `(fleetops/[^`]+\.py)`", section, re.M))


def main() -> int:
    ok = allowed()
    bad = []
    for p in sorted((ROOT / "fleetops").rglob("*.py")):
        if p.is_symlink():
            continue
        rel = p.relative_to(ROOT).as_posix()
        n = len(p.read_text().splitlines())
        if n > LIMIT and rel not in ok:
            bad.append(f"file_sizes: {rel} has {n} lines (limit {LIMIT}; split it, or say why in README's Code layout)")
    print("\n".join(bad)) if bad else None
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
