"""The salvage stages import one way: no module of fleetops.remote.sqlite.salvage imports,
directly or through others, a module that imports it (imports inside functions counted;
`from package import module` is an import of that module)."""
import ast
from pathlib import Path

import fleetops.remote.sqlite.salvage as pkg

PKG = "fleetops.remote.sqlite.salvage"


def edges():
    root = Path(pkg.__file__).parent
    mods = {(PKG if p.name == "__init__.py" else PKG + "." + p.stem): p for p in root.glob("*.py")}
    out = {m: set() for m in mods}
    for m, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PKG):
                for a in node.names:
                    sub = node.module + "." + a.name
                    out[m].add(sub if sub in mods else node.module)
            elif isinstance(node, ast.Import):
                out[m].update(a.name for a in node.names if a.name in mods)
    return out


def cycles(graph):
    found, state, stack = [], {}, []

    def visit(u):
        state[u] = "open"
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == "open":
                found.append(stack[stack.index(v):] + [v])
            elif v not in state:
                visit(v)
        stack.pop()
        state[u] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_salvage_stages_import_one_way():
    graph = edges()
    assert len(graph) > 10 and graph[PKG + ".write"]        # the package was read
    assert cycles(graph) == []
