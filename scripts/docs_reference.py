"""The docs site's reference pages, generated from the code at build time so they cannot drift.

An MkDocs hook (mkdocs.yml `hooks:`): `on_files` adds the pages below as generated files, never
written into docs/. Each is made from what the code itself holds: the argparse parsers (every
command's --help, examples included), the bundled playbooks' headers, the exit codes, the results
store's schema, the playbook keywords and modules with their declared arguments, and the audit's
verdicts, conditions and warning codes (read from the audit payload's source, the list the
runbooks test checks). `python scripts/docs_reference.py` prints every page, for reading.
"""
from __future__ import annotations

import ast
import contextlib
import io
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# --help is rendered at this width, so the page does not depend on the terminal that built it
HELP_COLUMNS = "100"


# --- the audit's codes ---------------------------------------------------------------------

def _audit_modules() -> dict[str, str]:
    """The source of every module the audit payload ships to a host (the bundler's own list)."""
    from fleetops.engine.payload import bundle_sources
    return bundle_sources("hermes.audit")


def _str(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_key(node, *names) -> bool:
    """`rec["verdict"]`, `rec["conditions"]`, a name `conds`: what a verdict or condition goes into."""
    if isinstance(node, ast.Subscript):
        return _str(node.slice) in names
    if isinstance(node, ast.Name):
        return node.id in ("conds",) and "conditions" in names
    return False


def audit_codes() -> dict[str, set[str]]:
    """{"verdict": …, "condition": …, "warning": …}: every code the audit payload can emit, from
    its source: the VERDICTS tuple and each literal assigned as a verdict, each literal added to
    the conditions, and each `{"code": "…"}` of a warning."""
    out: dict[str, set[str]] = {"verdict": set(), "condition": set(), "warning": set()}
    for source in _audit_modules().values():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assign):
                if any(isinstance(t, ast.Name) and t.id == "VERDICTS" for t in node.targets):
                    out["verdict"].update(s for s in map(_str, node.value.elts) if s)
                if any(_is_key(t, "verdict") for t in node.targets) and _str(node.value):
                    out["verdict"].add(_str(node.value))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("append", "insert") and _is_key(node.func.value, "conditions"):
                out["condition"].update(s for s in map(_str, node.args) if s)
            elif isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if k is not None and _str(k) == "code" and _str(v):
                        out["warning"].add(_str(v))
    return out


def runbook_anchors(text: str) -> set[str]:
    """The codes the runbooks page has an entry for: each `## `code`` heading."""
    found = set()
    for line in text.splitlines():
        if line.startswith("## `") and line.rstrip().endswith("`"):
            found.add(line.strip()[4:-1])
    return found


def codes_page() -> str:
    codes = audit_codes()
    lines = ["# Audit codes", "",
             "Every verdict, condition and warning code the audit can emit, read from the audit "
             "payload's source when this site was built. Each links to its runbook entry.", ""]
    for kind in ("verdict", "condition", "warning"):
        lines += [f"## {kind.capitalize()}s", ""]
        lines += [f"- [`{c}`](../runbooks.md#{c})" for c in sorted(codes[kind])]
        lines.append("")
    return "\n".join(lines)


# --- commands ------------------------------------------------------------------------------

def _subparsers(parser):
    import argparse
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _help(parser) -> str:
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            parser.print_help()
        return buf.getvalue().rstrip()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def command_helps() -> list[tuple[str, str]]:
    """[(command line, its --help)] for fleetops and every subcommand, nested ones included."""
    from fleetops.cli import build_parser
    top = build_parser()
    out = [("fleetops", _help(top))]
    for name, sub in _subparsers(top):
        out.append((f"fleetops {name}", _help(sub)))
        for name2, sub2 in _subparsers(sub):
            out.append((f"fleetops {name} {name2}", _help(sub2)))
    return out


def command_summaries() -> list[tuple[str, str]]:
    """[(name, its one-line help)] of the top-level commands, as `fleetops --help` lists them."""
    import argparse
    from fleetops.cli import build_parser
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return [(a.dest, a.help or "") for a in action._choices_actions]
    return []


def cli_page() -> str:
    lines = ["# Commands", "",
             "Each command's `--help`, as this version prints it (generated from the parser when the "
             "site is built). `python -m fleetops …` is the same as `fleetops …`.", "",
             "| command | what it does |", "|---|---|"]
    lines += [f"| [`fleetops {n}`](#fleetops-{n}) | {h} |" for n, h in command_summaries()]
    lines.append("")
    for cmd, text in command_helps():
        lines += [f"## `{cmd}`", "", "```text", f"$ {cmd} --help", text, "```", ""]
    return "\n".join(lines)


# --- playbooks, exit codes, schema, compatibility ------------------------------------------

def playbooks_page() -> str:
    from fleetops import bundled
    lines = ["# Bundled playbooks", "",
             "What `fleetops playbooks` prints, from each playbook's own header. Run one by name "
             "(`fleetops run repair -i INV`), change a variable for one run with `-e name=value`, or "
             "copy one out to adapt with `fleetops playbooks --copy NAME DIR`.", ""]
    for b in bundled.playbooks():
        lines += [f"## `{b.name}`", "", b.summary, ""]
        if b.variables:
            lines += ["| variable | what it does (default) |", "|---|---|"]
            lines += [f"| `{n}` | {t.replace('|', '&#124;')} |" for n, t in b.variables]
        else:
            lines.append("No variables.")
        lines.append("")
    return "\n".join(lines)


def exit_codes_page() -> str:
    from fleetops.cli import EXIT_CODES
    from fleetops.extensions import registry
    codes = {**EXIT_CODES, **registry().exit_codes}
    lines = ["# Exit codes", "", "Every command exits with one of these (from the code):", "",
             "| code | meaning |", "|---|---|"]
    lines += [f"| {c} | {codes[c]} |" for c in sorted(codes)]
    lines += ["", "For `audit` and `inspect`, 0 means every database healthy, and 5 wins over 2 and 3: "
              "the table names the hosts that could not be audited. For `salvage`, 2 means the result "
              "is partial. Bad input (4) means nothing was run and no host contacted: one "
              "`fleetops: error: FILE:LINE:COL: what` line says what and where. After 130 (Ctrl-C) "
              "the run is recorded as interrupted.", ""]
    return "\n".join(lines)


def schema_page() -> str:
    from fleetops.engine.results_schema import MIGRATIONS, SCHEMA, SCHEMA_VERSION
    lines = ["# Results schema", "",
             f"The central results store (`runs.db`, or PostgreSQL), schema version {SCHEMA_VERSION}. "
             "An older store is migrated on first open, one controller at a time; a newer one is refused. "
             f"Migrations this version knows: {', '.join(str(k) for k in sorted(MIGRATIONS)) or 'none'}.", "",
             "```sql", SCHEMA.strip(), "```", ""]
    from fleetops.hermes.audit import AUDIT_DDL
    lines += ["## The audit's tables", "", "Written by `fleetops audit` (and read by `report --audit` "
              "and the report site) beside the run tables:", "", "```sql", AUDIT_DDL.strip(), "```", ""]
    return "\n".join(lines)


def _arg_text(arg) -> str:
    t = arg.type if isinstance(arg.type, tuple) else (arg.type,)
    bits = ["/".join(getattr(x, "__name__", str(x)) for x in t)]
    if arg.required:
        bits.append("required")
    if arg.choices:
        bits.append("one of " + ", ".join(f"`{c}`" for c in arg.choices))
    if arg.default not in (None, False, ""):
        bits.append(f"default `{arg.default}`")
    return ", ".join(bits)


def _oracles() -> list[tuple[str, str]]:
    out = []
    for d in ("tests/scenario/compat", "tests/lab/compat"):
        for p in sorted((ROOT / d).glob("test_*.py")):
            doc = ast.get_docstring(ast.parse(p.read_text())) or ""
            out.append((f"{d}/{p.name}", " ".join(doc.split("\n\n")[0].split())))
    return out


ORACLE_RESULTS = ROOT / "tests" / "data" / "ansible" / "playbook-oracle.tsv"


def _corpus_results() -> list[str]:
    """The playbook oracle's own results (tests/scenario/compat/test_playbook_oracle.py checks
    every row against ansible-core's listing, so this table is what the oracle found)."""
    if not ORACLE_RESULTS.exists():
        return []
    rows = [ln.rstrip("\n").split("\t", 1) for ln in ORACLE_RESULTS.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    counts: dict[str, int] = {}
    for _, outcome in rows:
        counts[outcome] = counts.get(outcome, 0) + 1
    out = ["", "## Real playbooks, beside ansible-playbook", "",
           f"The {len(rows)} playbook files of the corpus (`tests/data/ansible/playbooks/`: ansible-core's "
           "own integration targets, trellis, ansible-for-devops; each one's origin in its `INDEX.tsv`), "
           "listed by `ansible-playbook --list-hosts --list-tasks` and by `fleetops run --list-hosts "
           "--list-tasks`. The oracle test checks every row against ansible-core on each run.", "",
           "| outcome | playbooks |", "|---|---|"]
    out += [f"| {o.replace('|', '&#124;')} | {n} |" for o, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    out += ["", "| playbook | outcome |", "|---|---|"]
    out += [f"| `{p}` | {o.replace('|', '&#124;')} |" for p, o in rows]
    return out


def compat_page() -> str:
    from fleetops.engine.playbook import keywords as kw
    from fleetops.extensions import registry
    lines = ["# Ansible compatibility", "",
             "What fleetops reads of an Ansible playbook, from the code's own keyword lists and each "
             "module's declared arguments; an argument not listed is refused at its line. The deliberate "
             "differences are in [Ansible users](../guides/ansible-users.md#differences-from-ansible-deliberate).", "",
             "## Keywords", "", "| where | keywords |", "|---|---|"]
    for label, keys in (("play", kw.PLAY_KEYS), ("task", kw.TASK_KEYS), ("block", kw.BLOCK_KEYS),
                        ("role entry", kw.ROLE_ENTRY_KEYS), ("include/import", kw.INCLUDE_KEYS),
                        ("role include", kw.ROLE_FROM_KEYS), ("loop_control", kw.LOOP_CONTROL_KEYS),
                        ("strategy", kw.STRATEGIES), ("order", kw.ORDERS)):
        lines.append(f"| {label} | {', '.join(f'`{k}`' for k in keys)} |")
    lines += ["", "Refused with a reason:", ""]
    lines += [f"- `{k}`: {v}" for k, v in sorted(kw.NOT_SUPPORTED.items())]
    lines += ["", "## Modules", "", "| module | arguments |", "|---|---|"]
    for name, cls in sorted(registry().modules.items()):
        args = getattr(cls, "args", None) or {}
        cell = "<br>".join(f"`{a}`: {_arg_text(v)}" for a, v in args.items()) or "(free form)"
        lines.append(f"| `{name}` | {cell} |")
    lines += _corpus_results()
    lines += ["", "## Checked against ansible-core", "",
              "Each of these tests runs ansible-core 2.19 as the oracle beside fleetops on the same files "
              "or hosts (the first paragraph of each test file's docstring):", "",
              "| test | what it compares |", "|---|---|"]
    lines += [f"| `{p}` | {d.replace('|', '&#124;')} |" for p, d in _oracles()]
    lines.append("")
    return "\n".join(lines)


PAGES = {
    "reference/commands.md": cli_page,
    "reference/playbooks.md": playbooks_page,
    "reference/exit-codes.md": exit_codes_page,
    "reference/results-schema.md": schema_page,
    "reference/ansible-compatibility.md": compat_page,
    "reference/audit-codes.md": codes_page,
}


def on_files(files, config):
    """MkDocs hook: add the generated pages (replacing nothing: docs/ holds no such file)."""
    from mkdocs.structure.files import File
    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    return files


if __name__ == "__main__":
    for uri, make in PAGES.items():
        print(f"<!-- {uri} -->\n{make()}")
