"""Each folder's import rule, checked on every .py under fleetops/ (imports inside functions too).

Imports run one way, each layer importing only the layers below it:
cli (`fleetops.cli`, `__main__`) → `fleetops.extensions` (the composition) → `fleetops.hermes` →
the thin generic layer (runner, display, report, options, bundled, report_site, lab) →
`fleetops.modules` → `fleetops.engine` → `fleetops.errors`. `fleetops/remote` imports only the
standard library and fleetops.remote (it runs on the host); controller code may import it.
No module reaches itself again through its imports (the cycle check), and none reaches into
another module's `_private` names (`from m import _x`, `m._x`; dunders are not private).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "fleetops"
# top to bottom: a module imports its own layer or a lower one
LAYERS = (
    ("fleetops.cli", "fleetops.__main__"),
    ("fleetops.extensions",),
    ("fleetops.hermes",),
    ("fleetops.runner", "fleetops.display", "fleetops.report", "fleetops.options", "fleetops.bundled",
     "fleetops.report_site", "fleetops.lab", "fleetops.playbooks"),
    ("fleetops.modules",),
    ("fleetops.engine",),
    ("fleetops.errors",),
)


def imported(source: str, module: str) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in `source`, the source of `module`."""
    package = module.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            # `from fleetops import hermes` names the package through the imported name
            out += [(node.lineno, f"{name}.{a.name}") for a in node.names if name == "fleetops"]
    return sorted(out)


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _layer(name: str):
    """The index of the layer `name` belongs to; None for the package itself, remote, or outside."""
    for i, layer in enumerate(LAYERS):
        if _within(name, layer):
            return i
    return None


def violations(source: str, module: str) -> list[str]:
    """The folder-rule breaks of one file, as `module:line: imports name`."""
    out = []
    for line, name in imported(source, module):
        if _within(module, ("fleetops.remote",)):
            top = name.split(".")[0]
            bad = not (_within(name, ("fleetops.remote",)) or name == "fleetops"
                       or (top in sys.stdlib_module_names and top != "fleetops"))
        elif name in ("fleetops", "fleetops.__version__") or not _within(name, ("fleetops",)) or _within(name, ("fleetops.remote",)):
            bad = False
        else:
            mine, theirs = _layer(module), _layer(name)
            bad = mine is None or theirs is None or theirs < mine
        if bad:
            out.append(f"{module}:{line}: imports {name}")
    return out


def import_graph(sources: dict[str, str]) -> dict[str, set[str]]:
    """module -> the package modules it imports (inside functions too); `from p import m` names p.m."""
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        names = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = imported(f"from {'.' * node.level}{node.module or ''} import x\n", module)[0][1]
                names |= {f"{base}.{a.name}" if f"{base}.{a.name}" in sources else base for a in node.names}
        graph[module] = {_nearest(n, sources) for n in names} - {None, module}
    return graph


def _nearest(name: str, modules) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Every set of two or more modules that reach each other (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(frozenset(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def test_every_folder_keeps_its_import_rule():
    files = sorted(PACKAGE.rglob("*.py"))
    assert len(files) > 50, "the walk must see the whole package"
    found = []
    for path in files:
        found += violations(path.read_text(encoding="utf-8"), _module_name(path))
    assert not found, "\n".join(found)


def test_the_rule_check_can_fail():
    """Fed sources that break each rule (at top level and inside a function), it reports them."""
    engine = ("import os\nfrom fleetops.engine import module\n"
              "def f():\n    from fleetops.modules.registry import GENERIC\n"
              "def g():\n    import fleetops.hermes.audit\n"
              "from fleetops import runner\nfrom .. import cli\n")
    assert violations(engine, "fleetops.engine.executor") == [
        "fleetops.engine.executor:4: imports fleetops.modules.registry",
        "fleetops.engine.executor:6: imports fleetops.hermes.audit",
        "fleetops.engine.executor:7: imports fleetops.runner",
        "fleetops.engine.executor:8: imports fleetops.cli",
    ]
    assert violations("from fleetops.hermes import audit\n", "fleetops.modules.copy") == [
        "fleetops.modules.copy:1: imports fleetops.hermes"]
    remote = ("import json, sqlite3\nfrom fleetops.remote import durable\nfrom . import facts\n"
              "def main(args):\n    import yaml\n    from fleetops.engine import payload\n")
    assert violations(remote, "fleetops.remote.files") == [
        "fleetops.remote.files:5: imports yaml",
        "fleetops.remote.files:6: imports fleetops.engine",
    ]
    assert violations(remote, "fleetops.hermes.audit") == []    # hermes may import what it needs


def _sources() -> dict[str, str]:
    return {_module_name(p): p.read_text(encoding="utf-8") for p in sorted(PACKAGE.rglob("*.py"))}


def test_no_module_imports_itself_through_others():
    sources = _sources()
    assert len(sources) > 50, "the walk must see the whole package"
    found = [sorted(c) for c in cycles(import_graph(sources))]
    assert not found, "\n".join(" <-> ".join(c) for c in found)


def test_the_cycle_check_can_fail():
    """A cycle through a function-level import and through `from package import module` is found."""
    sources = {"fleetops.a": "from fleetops import b\n",
               "fleetops.b": "def f():\n    from fleetops.c import x\n",
               "fleetops.c": "import fleetops.a\n",
               "fleetops.d": "from fleetops.a import y\n"}
    graph = import_graph(sources)
    assert graph["fleetops.a"] == {"fleetops.b"}
    assert cycles(graph) == [frozenset({"fleetops.a", "fleetops.b", "fleetops.c"})]
    assert cycles(import_graph({"fleetops.a": "import os\n", "fleetops.b": "from . import a\n"})) == []


def test_every_layer_imports_only_below_it():
    """hermes and the thin layer have their rules too: nothing imports a layer above its own."""
    assert violations("from fleetops.cli import main\nfrom fleetops import extensions\n",
                      "fleetops.hermes.audit") == ["fleetops.hermes.audit:1: imports fleetops.cli",
                                                   "fleetops.hermes.audit:2: imports fleetops.extensions"]
    assert violations("def f():\n    from fleetops.hermes import cli\n", "fleetops.runner") == [
        "fleetops.runner:2: imports fleetops.hermes"]
    assert violations("from fleetops.lab.lab import Lab\n", "fleetops.modules.copy") == [
        "fleetops.modules.copy:1: imports fleetops.lab.lab"]
    assert violations("from fleetops.engine import module\n", "fleetops.errors") == [
        "fleetops.errors:1: imports fleetops.engine"]
    assert violations("from fleetops.novel import x\n", "fleetops.runner") == [
        "fleetops.runner:1: imports fleetops.novel"]       # a new top-level name must be given a layer
    assert violations("from fleetops import runner, __version__\nfrom fleetops.engine import module\n"
                      "from fleetops.remote.hermes import audit\n", "fleetops.hermes.cli") == []


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_reaches(sources: dict[str, str]) -> list[str]:
    """`module:line: name` for each use of another package module's private name: imported
    (`from m import _x`) or reached as an attribute of a name an import bound to a module."""
    out = []
    for module, source in sources.items():
        tree = ast.parse(source)
        bound: dict[str, str] = {}      # local name -> the package module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if _within(a.name, ("fleetops",)):
                        bound[a.asname or "fleetops"] = a.name if a.asname else "fleetops"
            elif isinstance(node, ast.ImportFrom):
                base = imported(f"from {'.' * node.level}{node.module or ''} import x\n", module)[0][1]
                if not _within(base, ("fleetops",)) or base == module:
                    continue
                for a in node.names:
                    if _private(a.name):
                        out.append(f"{module}:{node.lineno}: {base}.{a.name}")
                    elif f"{base}.{a.name}" in sources:
                        bound[a.asname or a.name] = f"{base}.{a.name}"
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                target = ".".join([bound[value.id]] + chain)
                if target != module:
                    out.append(f"{module}:{node.lineno}: {target}.{node.attr}")
    return sorted(out)


def test_no_module_reaches_into_another_modules_private_names():
    sources = _sources()
    assert len(sources) > 50, "the walk must see the whole package"
    found = private_reaches(sources)
    assert not found, "\n".join(found)


def test_the_private_name_check_can_fail():
    """Imported, reached through a module bound by `import`, `from package import module` or
    a relative import: each found; a module's own names, dunders and other objects' are not."""
    sources = {"fleetops.a": "def _x(): pass\n_y = _x()\n",
               "fleetops.p.b": "from fleetops.a import _x, __doc__\n",
               "fleetops.p.c": "import fleetops.a\nimport fleetops.a as A\nfleetops.a._y\nA._x()\n",
               "fleetops.p.d": "from fleetops import a\nfrom . import b\na._x()\nb.__name__\n",
               "fleetops.p.e": "import os\nos._exit\nobj = object()\nobj._z\nfrom .b import _q\n",
               "fleetops.p": "from fleetops.p import _own\n_own\n"}
    assert private_reaches(sources) == [
        "fleetops.p.b:1: fleetops.a._x",
        "fleetops.p.c:3: fleetops.a._y",
        "fleetops.p.c:4: fleetops.a._x",
        "fleetops.p.d:3: fleetops.a._x",
        "fleetops.p.e:5: fleetops.p.b._q",
    ]


def test_only_the_module_bridge_imports_ansible():
    """ansible-core is an optional extra: only fleetops/modules/bridge imports it (inside its
    functions, so fleetops without it imports), and the engine never does."""
    found = []
    for module, source in _sources().items():
        for line, name in imported(source, module):
            if _within(name, ("ansible",)) and not _within(module, ("fleetops.modules.bridge",)):
                found.append(f"{module}:{line}: imports {name}")
    assert not found, "\n".join(found)
    top = [f"{m}:{n.lineno}" for m, s in _sources().items() if _within(m, ("fleetops.modules.bridge",))
           for n in ast.parse(s).body if isinstance(n, (ast.Import, ast.ImportFrom))
           and any(_within(a.name if isinstance(n, ast.Import) else (n.module or ""), ("ansible",)) for a in n.names)]
    assert not top, "the bridge imports ansible at module level: " + ", ".join(top)
